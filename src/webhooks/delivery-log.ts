import { createHash } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { isoKey, PAGE_TIME_LIMIT_MS, pageOf, type PageInfo, type PageRequest } from '../common/pagination.js';
import { Database, type Queryable } from '../database/database.js';
import { StatementParams } from '../database/multi-row.js';
import { DELIVERY_STATUS_VALUES } from '../contract/generated.js';
import type { RunState } from '../runs/run-state.js';

/** schemas/api/delivery-status.schema.json */
export const DELIVERY_STATUSES = DELIVERY_STATUS_VALUES;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface DeliveryEntry {
  id: string;
  webhookId: string;
  status: DeliveryStatus;
  identity: string | null;
  sizeBytes: number | null;
  receivedAt: Date;
  clientAddress: string | null;
  headers: Record<string, string>;
  /** The parsed body, for Accepted (and Replayed) entries only. */
  payload?: unknown;
  /** A Replayed entry: the entry it replays. */
  replayOf?: string | null;
}

/** The statuses that keep the payload: an Accepted delivery, and its replays. */
const WITH_PAYLOAD: readonly DeliveryStatus[] = ['accepted', 'replayed'];

/** Keep at least this many newest entries per webhook, and everything younger than RETENTION_DAYS. */
const RETENTION_KEEP_NEWEST = 50;
const RETENTION_DAYS = 7;

/**
 * GET /webhooks/{uid}/deliveries: newest first, filtered (docs/webhooks.md "Searching the delivery
 * log"; the filters AND together).
 */
export interface DeliveryListQuery extends PageRequest {
  status?: DeliveryStatus;
  /** RFC 3339; received at or after. */
  receivedAfter?: string;
  /** RFC 3339; received before. */
  receivedBefore?: string;
  identity?: string;
  /** JSON text of an object or array: payloads containing it (jsonb `@>`). */
  payloadContains?: string;
}

/**
 * The cursor scope of a delivery listing: a cursor made under some filters is refused under others
 * (the same position there is another listing).
 */
export function deliveriesScope(filters: Omit<DeliveryListQuery, keyof PageRequest>): string {
  const key = [
    filters.status,
    filters.receivedAfter,
    filters.receivedBefore,
    filters.identity,
    filters.payloadContains,
  ];
  return `deliveries:${createHash('sha256').update(JSON.stringify(key)).digest('base64url').slice(0, 16)}`;
}

const COLUMNS = `id, webhook_id, status, identity, size_bytes, received_at, client_address, headers`;
/** What a read returns: COLUMNS and the replay link (not among an ingress insert's columns). */
const READ_COLUMNS = `${COLUMNS}, replay_of`;

/** A new entry's row, in the order of COLUMNS and then the payload. */
const ENTRY_COLUMNS = {
  id: 'uuid',
  webhook_id: 'uuid',
  status: 'text',
  identity: 'text',
  size_bytes: 'bigint',
  received_at: 'timestamptz',
  client_address: 'text',
  headers: 'jsonb',
  payload: 'text',
} as const;

/** The delivery log: what every sender's request came to, per webhook. */
/**
 * What the caller is told when a page of the log ran past PAGE_TIME_LIMIT_MS: a filter that no
 * entry matches walks the webhook's whole log (`status` has no index; retention keeps 7 days).
 */
const PAGE_TOO_LONG =
  `Finding this page of deliveries took longer than ${PAGE_TIME_LIMIT_MS / 1000} s and was stopped. ` +
  'Retry later, or narrow it with received_after and received_before.';

@Injectable()
export class DeliveryLog {
  constructor(@Inject(Database) private readonly db: Database) {}

  /**
   * Records entries in one statement. An Accepted entry (its payload text beside it) whose identity
   * was already accepted is recorded as Duplicate, without the payload: the unique index decides, so
   * of concurrent identical deliveries on any replica, or in one batch, exactly one is Accepted.
   * Returns the ids of the entries recorded as Accepted.
   */
  async record(q: Queryable, entries: Array<DeliveryEntry & { payloadText?: string }>): Promise<Set<string>> {
    const params = new StatementParams();
    const ctes = this.recordPart(params, entries);
    const accepted = await q.query<{ id: string }>(`WITH ${ctes} SELECT id FROM accepted`, params.values);
    return new Set(accepted.map((r) => r.id));
  }

  /**
   * `record` as CTEs of a larger statement, its parameters added to `params`; the CTE `accepted`
   * returns the ids of the entries recorded as Accepted.
   */
  recordPart(params: StatementParams, entries: Array<DeliveryEntry & { payloadText?: string }>): string {
    const rows = params.rows(
      'e',
      ENTRY_COLUMNS,
      entries.map((e) => ({
        id: e.id,
        webhook_id: e.webhookId,
        status: e.status,
        identity: e.identity,
        size_bytes: e.sizeBytes,
        received_at: e.receivedAt,
        client_address: e.clientAddress,
        headers: e.headers,
        payload: e.payloadText,
      })),
    );
    return `e AS (
         SELECT * FROM ${rows}
       ), accepted AS (
         INSERT INTO deliveries (${COLUMNS}, payload)
         SELECT * FROM e WHERE status = 'accepted'
         ON CONFLICT (webhook_id, identity) WHERE status = 'accepted' DO NOTHING
         RETURNING id
       ), others AS (
         INSERT INTO deliveries (${COLUMNS})
         SELECT id, webhook_id, CASE status WHEN 'accepted' THEN 'duplicate' ELSE status END, identity, size_bytes,
                received_at, client_address, headers
           FROM e WHERE id NOT IN (SELECT id FROM accepted)
       )`;
  }

  async list(
    webhookId: string,
    query: DeliveryListQuery,
  ): Promise<{ entries: DeliveryEntry[]; pageInfo: PageInfo }> {
    const params: unknown[] = [webhookId, query.limit + 1];
    const p = (v: unknown) => {
      params.push(v);
      return `$${params.length}`;
    };
    const where = [`webhook_id = $1`];
    if (query.status) where.push(`status = ${p(query.status)}`);
    if (query.receivedAfter) where.push(`received_at >= ${p(query.receivedAfter)}::timestamptz`);
    if (query.receivedBefore) where.push(`received_at < ${p(query.receivedBefore)}::timestamptz`);
    if (query.identity !== undefined) where.push(`identity = ${p(query.identity)}`);
    // The expression of the index deliveries_payload_search (migration 1763686300000), exactly.
    if (query.payloadContains !== undefined)
      where.push(
        `payload IS NOT NULL AND delivery_search_json(webhook_id, payload) @> jsonb_build_object($1::text, ${p(query.payloadContains)}::jsonb)`,
      );
    // As a runs list (run-list.ts): how many entries a filter's value matches decides the plan, so a
    // filtered page is planned for its values; a generic plan walked the webhook's every entry for a
    // payload that none contains.
    const planEachTime = where.length > 1;
    if (query.after)
      where.push(`(received_at, id) < (${p(new Date(isoKey(query.after)))}, ${p(query.after.id)})`);
    const rows = await this.db.queryWithin(
      { ms: PAGE_TIME_LIMIT_MS, tooLong: PAGE_TOO_LONG },
      `SELECT ${READ_COLUMNS} FROM deliveries WHERE ${where.join(' AND ')} ORDER BY received_at DESC, id DESC LIMIT $2`,
      params,
      { planEachTime },
    );
    const { items, pageInfo } = pageOf(rows.map(toEntry), query.limit, (last) => ({
      scope: deliveriesScope(query),
      key: last.receivedAt.toISOString(),
      id: last.id,
    }));
    return { entries: items, pageInfo };
  }

  /** The id of the team's webhook with this UID; undefined when the team has none. */
  async webhookIdOf(teamId: string, uid: string): Promise<string | undefined> {
    const [row] = await this.db.query<{ id: string }>(
      `SELECT id FROM webhooks WHERE uid = $1 AND team_id = $2`,
      [uid, teamId],
    );
    return row?.id;
  }

  /** The runs an entry started, oldest first. */
  async runsStartedBy(teamId: string, entryId: string): Promise<Array<{ id: string; state: RunState }>> {
    return this.db.query<{ id: string; state: RunState }>(
      `SELECT id, state FROM runs WHERE team_id = $1 AND source = 'WEBHOOK' AND metadata->>'webhook_delivery_entry' = $2
        ORDER BY created_at, id`,
      [teamId, entryId],
    );
  }

  async get(
    webhookId: string,
    id: string,
  ): Promise<(DeliveryEntry & { payloadText?: string; replayedAs: string[] }) | undefined> {
    const [row] = await this.db.query(
      `SELECT ${READ_COLUMNS}, payload,
              ARRAY(SELECT r.id FROM deliveries r WHERE r.replay_of = d.id ORDER BY r.received_at, r.id) AS replayed_as
         FROM deliveries d WHERE webhook_id = $1 AND id = $2`,
      [webhookId, id],
    );
    if (!row) return undefined;
    const entry = { ...toEntry(row), replayedAs: row.replayed_as as string[] };
    // Stored as the exact text received (jsonb would refuse \u0000 and reformat numbers).
    if (WITH_PAYLOAD.includes(entry.status) && row.payload !== null)
      return { ...entry, payload: JSON.parse(row.payload as string), payloadText: row.payload as string };
    return entry;
  }

  /** Records a replay of an Accepted entry: its own entry, with the payload, linked to the original. */
  async recordReplay(
    q: Queryable,
    entry: DeliveryEntry & { payloadText: string; replayOf: string },
  ): Promise<void> {
    await q.execute(
      `INSERT INTO deliveries (${COLUMNS}, payload, replay_of) VALUES ($1, $2, 'replayed', $3, $4, $5, $6, $7, $8, $9)`,
      [
        entry.id,
        entry.webhookId,
        entry.identity,
        entry.sizeBytes,
        entry.receivedAt,
        entry.clientAddress,
        entry.headers,
        entry.payloadText,
        entry.replayOf,
      ],
    );
  }

  /** Deletes entries that are both beyond the newest 50 of their webhook and older than 7 days. */
  async prune(now: Date): Promise<number> {
    const cutoff = new Date(now.getTime() - RETENTION_DAYS * 86_400_000);
    return this.db.execute(
      `DELETE FROM deliveries d USING (
         SELECT id FROM (
           SELECT id, received_at,
                  row_number() OVER (PARTITION BY webhook_id ORDER BY received_at DESC, id DESC) AS n
             FROM deliveries
            WHERE webhook_id IN (SELECT webhook_id FROM deliveries WHERE received_at < $1)
         ) ranked
         WHERE n > $2 AND received_at < $1
       ) old WHERE d.id = old.id`,
      [cutoff, RETENTION_KEEP_NEWEST],
    );
  }
}

function toEntry(row: Record<string, any>): DeliveryEntry {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    status: row.status,
    identity: row.identity,
    sizeBytes: row.size_bytes === null ? null : Number(row.size_bytes),
    receivedAt: row.received_at,
    clientAddress: row.client_address,
    headers: row.headers,
    ...(row.replay_of ? { replayOf: row.replay_of } : {}),
  };
}
