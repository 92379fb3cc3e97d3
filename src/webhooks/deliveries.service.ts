import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { webhookRun } from '../automations/run-envelope.js';
import { Clock } from '../common/clock.js';
import { Metrics } from '../common/metrics.js';
import { newUuid, UUID_PATTERN } from '../common/ids.js';
import { Conflict, invalidParam, NotFound } from '../common/problem.js';
import { Database } from '../database/database.js';
import { RunsRepository } from '../runs/runs.repository.js';
import { WEBHOOK_UID } from './ingress.service.js';
import { DeliveryLog, type DeliveryEntry, type DeliveryListQuery } from './delivery-log.js';
import { WebhookDirectory } from './webhook-directory.js';
import type { DeliveryDetail, DeliveryItem } from '../contract/generated.js';

function present(e: DeliveryEntry): DeliveryItem {
  return {
    id: e.id,
    delivery_id: e.identity,
    status: e.status,
    size_bytes: e.sizeBytes,
    received_at: e.receivedAt.toISOString(),
    client_address: e.clientAddress,
    ...(e.replayOf ? { replay_of: e.replayOf } : {}),
  };
}

/**
 * Reads a team's delivery log, and replays an Accepted delivery; a webhook of another team is
 * "not found".
 */
@Injectable()
export class DeliveriesService {
  constructor(
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
    @Inject(Database) private readonly db: Database,
    @Inject(WebhookDirectory) private readonly directory: WebhookDirectory,
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(Metrics) private readonly metrics: Metrics,
  ) {}

  async list(auth: AuthContext, uid: string, query: DeliveryListQuery) {
    const webhookId = await this.webhookOf(auth, uid);
    const { entries, pageInfo } = await this.log.list(webhookId, query);
    return { deliveries: entries.map(present), page_info: pageInfo };
  }

  async get(auth: AuthContext, uid: string, id: string): Promise<DeliveryDetail> {
    const webhookId = await this.webhookOf(auth, uid);
    const entry = UUID_PATTERN.test(id) ? await this.log.get(webhookId, id) : undefined;
    if (!entry) throw new NotFound(`Webhook ${uid} has no delivery log entry ${id}.`);
    const runs = await this.log.runsStartedBy(auth.team.id, entry.id);
    return {
      ...present(entry),
      headers: entry.headers,
      ...('payloadText' in entry ? { payload: entry.payload } : {}),
      ...(entry.status === 'accepted' ? { replayed_as: entry.replayedAs } : {}),
      runs: runs.map((r) => ({ run_id: r.id, state: r.state })),
    };
  }

  /**
   * Replays an Accepted delivery: evaluates its stored payload and headers against the webhook's
   * automations as they are now, and records a Replayed entry linked to it together with the runs
   * that starts (one transaction). Every request makes a new entry: a replay is an operator's
   * deliberate act, so there is nothing to deduplicate (docs/webhooks.md "Replay").
   */
  async replay(auth: AuthContext, uid: string, id: string) {
    const webhookId = await this.webhookOf(auth, uid);
    const original = UUID_PATTERN.test(id) ? await this.log.get(webhookId, id) : undefined;
    if (!original) throw new NotFound(`Webhook ${uid} has no delivery log entry ${id}.`);
    if (original.status !== 'accepted' || original.payloadText === undefined)
      throw invalidParam(
        'id',
        `delivery log entry ${id} is ${original.status}; only Accepted deliveries can be replayed (pick one from GET /api/v1/webhooks/${uid}/deliveries?status=accepted)`,
      );
    const hook = await this.directory.get(uid);
    if (!hook || hook.id !== webhookId)
      throw new Conflict(
        `Webhook ${uid} is disabled or deleted, and starts nothing; enable it to replay its deliveries.`,
      );
    const entry = {
      id: newUuid(),
      webhookId,
      status: 'replayed' as const,
      identity: original.identity,
      sizeBytes: original.sizeBytes,
      receivedAt: this.clock.now(),
      clientAddress: null,
      headers: original.headers,
      payloadText: original.payloadText,
      replayOf: original.id,
    };
    const delivery = {
      teamId: hook.teamId,
      webhookUid: hook.uid,
      webhookName: hook.name,
      identity: original.identity ?? original.id,
      entryId: entry.id,
      body: Buffer.from(original.payloadText),
      replayOf: { entryId: original.id, receivedAt: original.receivedAt },
    };
    const runs = hook.triggers
      .filter((t) => t.matches(original.payload, original.headers))
      .map((t) => webhookRun(t, delivery));
    await this.db.transaction(async (tx) => {
      await this.log.recordReplay(tx, entry);
      for (const run of runs) await this.runs.insert(tx, run, entry.receivedAt);
    });
    this.metrics.deliveries.inc({ status: 'replayed' });
    return this.get(auth, uid, entry.id);
  }

  private async webhookOf(auth: AuthContext, uid: string): Promise<string> {
    if (!WEBHOOK_UID.test(uid)) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    const id = await this.log.webhookIdOf(auth.team.id, uid);
    if (!id) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    return id;
  }
}
