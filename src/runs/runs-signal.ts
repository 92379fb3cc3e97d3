import { Inject, Injectable, Optional } from '@nestjs/common';
import { CHANNELS } from '../database/channels.js';
import { Notifications } from '../database/notifications.js';

/** The wake-up channel's name, for whoever LISTENs from outside (tests); defined once in CHANNELS. */
export const RUNS_QUEUED_CHANNEL = CHANNELS.runsQueued.name;

/** At most one run-changed NOTIFY per this many ms per process: the streams' news, never a hot-path cap. */
const CHANGED_EVERY_MS = 20;

/**
 * Tells whoever executes runs that something changed, without knowing who that is. A NOTIFY inside
 * a transaction serialises commits, so `queued()` is sent outside any transaction, once the caller's
 * commit is done (callers call it through Queryable.afterCommit), and coalesced: all calls in one
 * burst become a single NOTIFY, sent on the next turn of the event loop. Sent before the commit, a
 * notify could overtake it (about one run in six on a durable PostgreSQL): the worker it woke found
 * nothing to claim and the run waited for the next wake-up or the 2 s poll. Control signals are rare
 * and per run, sent after the caller's commit. This process's own workers hear both at once.
 */
@Injectable()
export class RunsSignal {
  private pending = false;
  private changePending = false;
  private lastChange = 0;

  constructor(@Optional() @Inject(Notifications) private readonly notifications?: Notifications) {}

  queued(): void {
    if (this.pending || !this.notifications) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      this.notifications!.publish(CHANNELS.runsQueued, undefined).catch(() => undefined);
    });
  }

  /**
   * Runs changed (a state, conversation events): the live streams read what is new. Sent after the
   * caller's commit like `queued()`, and throttled to one NOTIFY per CHANGED_EVERY_MS whatever the
   * number of changes, so it costs the commits nothing.
   */
  changed(): void {
    if (this.changePending || !this.notifications) return;
    this.changePending = true;
    const wait = Math.max(0, this.lastChange + CHANGED_EVERY_MS - Date.now());
    setTimeout(() => {
      this.changePending = false;
      this.lastChange = Date.now();
      this.notifications!.publish(CHANNELS.runChanged, undefined).catch(() => undefined);
    }, wait).unref();
  }

  async control(runId: string, kind: 'followup' | 'cancel' | 'interrupt'): Promise<void> {
    await this.notifications?.publish(CHANNELS.runControl, { run_id: runId, kind });
  }
}
