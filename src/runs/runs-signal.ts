import { Inject, Injectable, Optional } from '@nestjs/common';
import { Database } from '../database/database.js';

/** Channel: "some run became QUEUED"; no payload. Whoever executes runs LISTENs here. */
export const RUNS_QUEUED_CHANNEL = 'factoryd_runs_queued';
/** Channel: a follow-up or cancel for one live run; payload `{"run_id":…,"kind":"followup"|"cancel"}`. */
export const RUN_CONTROL_CHANNEL = 'factoryd_run_control';

/**
 * Tells whoever executes runs that something changed, without knowing who that is. A NOTIFY inside
 * a transaction serialises commits, so `queued()` is sent outside any transaction, once the caller's
 * commit is done (callers call it through Queryable.afterCommit), and coalesced: all calls in one
 * burst become a single NOTIFY, sent on the next turn of the event loop. Sent before the commit, a
 * notify could overtake it (about one run in six on a durable PostgreSQL): the worker it woke found
 * nothing to claim and the run waited for the next wake-up or the 2 s poll. Control signals are rare
 * and per run, sent after the caller's commit.
 */
@Injectable()
export class RunsSignal {
  private pending = false;

  constructor(@Optional() @Inject(Database) private readonly db?: Database) {}

  queued(): void {
    if (this.pending || !this.db) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      this.db!.execute(`SELECT pg_notify($1, '')`, [RUNS_QUEUED_CHANNEL]).catch(() => undefined);
    });
  }

  async control(runId: string, kind: 'followup' | 'cancel'): Promise<void> {
    await this.db?.execute(`SELECT pg_notify($1, $2)`, [
      RUN_CONTROL_CHANNEL,
      JSON.stringify({ run_id: runId, kind }),
    ]);
  }
}
