import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { UUID_PATTERN } from '../common/ids.js';
import { NotFound } from '../common/problem.js';
import { WEBHOOK_UID } from './ingress.service.js';
import { DeliveryLog, type DeliveryEntry, type DeliveryListQuery } from './delivery-log.js';

function present(e: DeliveryEntry) {
  return {
    id: e.id,
    delivery_id: e.identity,
    status: e.status,
    size_bytes: e.sizeBytes,
    received_at: e.receivedAt.toISOString(),
    client_address: e.clientAddress,
  };
}

/** Reads a team's delivery log; a webhook of another team is "not found". */
@Injectable()
export class DeliveriesService {
  constructor(@Inject(DeliveryLog) private readonly log: DeliveryLog) {}

  async list(auth: AuthContext, uid: string, query: DeliveryListQuery) {
    const webhookId = await this.webhookOf(auth, uid);
    const { entries, pageInfo } = await this.log.list(webhookId, query);
    return { deliveries: entries.map(present), page_info: pageInfo };
  }

  async get(auth: AuthContext, uid: string, id: string) {
    const webhookId = await this.webhookOf(auth, uid);
    const entry = UUID_PATTERN.test(id) ? await this.log.get(webhookId, id) : undefined;
    if (!entry) throw new NotFound(`Webhook ${uid} has no delivery log entry ${id}.`);
    const runs = await this.log.runsStartedBy(auth.team.id, entry.id);
    return {
      ...present(entry),
      headers: entry.headers,
      ...(entry.status === 'accepted' ? { payload: entry.payload } : {}),
      runs: runs.map((r) => ({ run_id: r.id, state: r.state })),
    };
  }

  private async webhookOf(auth: AuthContext, uid: string): Promise<string> {
    if (!WEBHOOK_UID.test(uid)) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    const id = await this.log.webhookIdOf(auth.team.id, uid);
    if (!id) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    return id;
  }
}
