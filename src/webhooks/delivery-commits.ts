import { Inject, Injectable } from '@nestjs/common';
import { Batcher, type Settled } from '../common/batcher.js';
import { Clock } from '../common/clock.js';
import { Database } from '../database/database.js';
import { StatementParams } from '../database/multi-row.js';
import type { NewRun } from '../runs/run.js';
import { RunsRepository } from '../runs/runs.repository.js';
import { DeliveryLog, type DeliveryEntry, type DeliveryStatus } from './delivery-log.js';

/** A delivery past the rate limit: its log entry and the runs it starts if it is Accepted. */
export interface PendingDelivery {
  /** `accepted` (it may turn out a Duplicate) or `rejected_invalid_json`. */
  entry: DeliveryEntry & { payloadText?: string };
  runs: NewRun[];
}

/** A batch's statement stays around a few MB even with 256 KiB bodies. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * Group commit for the ingress: deliveries that arrive together are written in one transaction
 * (their log entries in one statement, their runs in one more), and each caller learns its entry's
 * final status only after that commit, so a 202 still means "durably committed". If a batch fails,
 * each of its deliveries is retried in a transaction of its own: one bad delivery fails alone.
 */
@Injectable()
export class DeliveryCommits {
  private readonly batcher = new Batcher<PendingDelivery, DeliveryStatus>((batch) => this.commit(batch), {
    concurrency: 1,
    maxItems: 200,
    maxWeight: MAX_BATCH_BYTES,
    // The body travels once (its runs' attachments are copied from it in the statement); a run's own
    // fields (prompt, config, metadata) add about a kilobyte each.
    weigh: (d) => (d.entry.sizeBytes ?? 0) + 1024 * d.runs.length,
  });

  constructor(
    @Inject(Database) private readonly db: Database,
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  /** Resolves with the status the entry was recorded with, once it is committed. */
  record(delivery: PendingDelivery): Promise<DeliveryStatus> {
    return this.batcher.submit(delivery);
  }

  private async commit(batch: PendingDelivery[]): Promise<Array<Settled<DeliveryStatus>>> {
    try {
      // One statement, so one round trip and no BEGIN/COMMIT: the entries, and the runs of those the
      // unique index let through as Accepted (a Duplicate starts nothing).
      const params = new StatementParams();
      const log = this.log.recordPart(
        params,
        batch.map((d) => d.entry),
      );
      const started = batch.flatMap((d) => d.runs.map((run) => ({ run, entry: d.entry.id })));
      const runs = this.runs.insertManyPart(
        params,
        started.map((s) => s.run),
        this.clock.now(),
        // `e`: the entries' rows (recordPart), each Accepted one with its payload text.
        { keys: started.map((s) => s.entry), cte: 'accepted', payloads: 'e' },
      );
      const rows = await this.db.query<{ id: string }>(
        `WITH ${log}, ${runs.ctes} SELECT id FROM accepted`,
        params.values,
      );
      const accepted = new Set(rows.map((r) => r.id));
      if (started.some((s) => accepted.has(s.entry))) this.runs.queued();
      return batch.map(({ entry }) => ({
        status: 'fulfilled',
        value: entry.status === 'accepted' && !accepted.has(entry.id) ? 'duplicate' : entry.status,
      }));
    } catch (err) {
      if (batch.length === 1) return [{ status: 'rejected', reason: err }];
      return Promise.all(batch.map(async (d) => (await this.commit([d]))[0]!));
    }
  }
}
