import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { UUID_PATTERN } from '../common/ids.js';
import { InvalidRequest, NotFound } from '../common/problem.js';
import { Database } from '../database/database.js';
import { WEBHOOK_UID } from './ingress.service.js';
import { DELIVERY_STATUSES, DeliveryLog, type DeliveryEntry, type DeliveryStatus } from './delivery-log.js';

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
  constructor(
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
    @Inject(Database) private readonly db: Database,
  ) {}

  async list(auth: AuthContext, uid: string, query: Record<string, unknown>) {
    const webhookId = await this.webhookOf(auth, uid);
    const status = single(query.status, 'status');
    if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
      throw new InvalidRequest(`status must be one of ${DELIVERY_STATUSES.join(', ')}`);
    }
    const limitText = single(query.limit, 'limit') ?? '50';
    if (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100) {
      throw new InvalidRequest('limit must be a whole number from 1 to 100');
    }
    const { entries, pageInfo } = await this.log.list(webhookId, {
      status: status as DeliveryStatus | undefined,
      cursor: single(query.cursor, 'cursor'),
      limit: Number(limitText),
    });
    return { deliveries: entries.map(present), page_info: pageInfo };
  }

  async get(auth: AuthContext, uid: string, id: string) {
    const webhookId = await this.webhookOf(auth, uid);
    const entry = UUID_PATTERN.test(id) ? await this.log.get(webhookId, id) : undefined;
    if (!entry) throw new NotFound(`Webhook ${uid} has no delivery log entry ${id}.`);
    const runs = await this.db.query<{ id: string; state: string }>(
      `SELECT id, state FROM runs WHERE team_id = $1 AND source = 'WEBHOOK' AND metadata->>'webhook_delivery_entry' = $2
        ORDER BY created_at, id`,
      [auth.team.id, entry.id],
    );
    return {
      ...present(entry),
      headers: entry.headers,
      ...(entry.status === 'accepted' ? { payload: entry.payload } : {}),
      runs: runs.map((r) => ({ run_id: r.id, state: r.state })),
    };
  }

  private async webhookOf(auth: AuthContext, uid: string): Promise<string> {
    if (!WEBHOOK_UID.test(uid)) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    const [row] = await this.db.query<{ id: string }>(
      `SELECT id FROM webhooks WHERE uid = $1 AND team_id = $2`,
      [uid, auth.team.id],
    );
    if (!row) throw new NotFound(`Your team has no webhook with the UID ${uid}.`);
    return row.id;
  }
}

function single(v: unknown, name: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new InvalidRequest(`${name} may be given once`);
  return v;
}
