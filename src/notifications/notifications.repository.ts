import { Database, type Queryable } from '../database/database.js';
import type { AttemptOutcome } from './notification-sender.js';

export interface EndpointRow {
  id: string;
  team_id: string;
  factory_id: string | null;
  name: string;
  url: string;
  event_types: string[];
  description: string | null;
  secret: Buffer | null;
  enabled: boolean;
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
}

export interface MessageRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  type: string;
  run_id: string | null;
  payload: Record<string, unknown>;
  event_at: Date;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: Date | null;
  created_at: Date;
  delivered_at: Date | null;
}

export interface AttemptRow {
  id: string;
  message_id: string;
  endpoint_id: string;
  attempted_at: Date;
  succeeded: boolean;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  response_excerpt: string | null;
  manual: boolean;
}

/** A message claimed for an attempt, with where it goes. */
export interface DueMessage extends MessageRow {
  url: string;
  /** The endpoint's own sealed secret (API), or the team secret version its factory file pinned. */
  secret: Buffer | null;
  secret_version_id: string | null;
}

/** Fan-outs take turns across replicas, so a run's messages are created in its events' order. */
const FAN_OUT_LOCK = 7_146_110_017;
const FAN_OUT_BATCH = 500;

const ENDPOINT_COLUMNS = `id, team_id, factory_id, name, url, event_types, description, secret, enabled,
  disabled_reason, consecutive_failures, created_at, updated_at`;
const MESSAGE_COLUMNS = `id, event_id, endpoint_id, type, run_id, payload, event_at, status, attempts,
  next_attempt_at, created_at, delivered_at`;

/**
 * Endpoints, the outbox, messages and attempts (docs/notifications.md). Outbox rows are written by
 * triggers on `runs` and `deliveries` (migration NotificationOutbox), never here.
 */
export class NotificationsRepository {
  constructor(private readonly db: Database) {}

  async insertEndpoint(
    e: Omit<EndpointRow, 'created_at' | 'updated_at' | 'consecutive_failures' | 'disabled_reason'>,
  ): Promise<EndpointRow | undefined> {
    const [row] = await this.db.query<EndpointRow>(
      `INSERT INTO notification_endpoints (id, team_id, factory_id, name, url, event_types, description, secret, enabled)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (team_id, name) DO NOTHING RETURNING ${ENDPOINT_COLUMNS}`,
      [e.id, e.team_id, e.factory_id, e.name, e.url, e.event_types, e.description, e.secret, e.enabled],
    );
    return row;
  }

  async findEndpoint(teamId: string, id: string): Promise<EndpointRow | undefined> {
    const [row] = await this.db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM notification_endpoints WHERE id = $1 AND team_id = $2`,
      [id, teamId],
    );
    return row;
  }

  listEndpoints(teamId: string): Promise<EndpointRow[]> {
    return this.db.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM notification_endpoints WHERE team_id = $1 ORDER BY name`,
      [teamId],
    );
  }

  /** Changes what is given (undefined: unchanged); enabling clears the failure run and the reason. */
  async updateEndpoint(
    teamId: string,
    id: string,
    patch: {
      url?: string;
      event_types?: string[];
      description?: string | null;
      enabled?: boolean;
      secret?: Buffer;
    },
  ): Promise<EndpointRow | undefined> {
    const [row] = await this.db.query<EndpointRow>(
      `UPDATE notification_endpoints SET
              url = coalesce($3, url), event_types = coalesce($4, event_types),
              description = CASE WHEN $5 THEN $6 ELSE description END,
              enabled = coalesce($7, enabled),
              disabled_reason = CASE WHEN $7 IS NULL THEN disabled_reason ELSE NULL END,
              consecutive_failures = CASE WHEN $7 THEN 0 ELSE consecutive_failures END,
              secret = coalesce($8, secret), updated_at = now()
        WHERE id = $1 AND team_id = $2 RETURNING ${ENDPOINT_COLUMNS}`,
      [
        id,
        teamId,
        patch.url ?? null,
        patch.event_types ?? null,
        patch.description !== undefined,
        patch.description ?? null,
        patch.enabled ?? null,
        patch.secret ?? null,
      ],
    );
    return row;
  }

  async deleteEndpoint(teamId: string, id: string): Promise<boolean> {
    return (
      (await this.db.execute(`DELETE FROM notification_endpoints WHERE id = $1 AND team_id = $2`, [
        id,
        teamId,
      ])) > 0
    );
  }

  listMessages(endpointId: string, limit: number, status?: string): Promise<MessageRow[]> {
    return this.db.query<MessageRow>(
      `SELECT ${MESSAGE_COLUMNS} FROM notification_messages
        WHERE endpoint_id = $1 AND ($3::text IS NULL OR status = $3)
        ORDER BY created_at DESC, event_id DESC LIMIT $2`,
      [endpointId, limit, status ?? null],
    );
  }

  listAttempts(endpointId: string, limit: number, messageId?: string): Promise<AttemptRow[]> {
    return this.db.query<AttemptRow>(
      `SELECT id::text, message_id, endpoint_id, attempted_at, succeeded, status_code, latency_ms, error, response_excerpt, manual
         FROM notification_attempts WHERE endpoint_id = $1 AND ($3::uuid IS NULL OR message_id = $3)
        ORDER BY attempted_at DESC, id DESC LIMIT $2`,
      [endpointId, limit, messageId ?? null],
    );
  }

  /** A message goes out again now, with the whole retry schedule ahead of it (resend). */
  async resend(endpointId: string, messageId: string, now: Date): Promise<MessageRow | undefined> {
    const [row] = await this.db.query<MessageRow>(
      `UPDATE notification_messages SET status = 'pending', attempts = 0, next_attempt_at = $3, leased_until = NULL
        WHERE id = $2 AND endpoint_id = $1 RETURNING ${MESSAGE_COLUMNS}`,
      [endpointId, messageId, now],
    );
    return row;
  }

  /**
   * Turns committed outbox events into one message per subscribed, enabled endpoint, and removes them
   * from the outbox, in one transaction under FAN_OUT_LOCK (taken first, so the statement sees what
   * the lock's previous holder committed). Returns how many events it took.
   */
  async fanOut(firstAttemptDelayMs: number): Promise<number> {
    // Most passes find the outbox empty: one cheap read on the pool, no transaction.
    if (!(await this.db.query(`SELECT 1 FROM notification_outbox LIMIT 1`)).length) return 0;
    const [row] = await this.db.transaction(async (tx) => {
      await tx.query(`SELECT pg_advisory_xact_lock(${FAN_OUT_LOCK})`);
      return tx.query<{ events: number }>(
        `WITH ev AS (
         DELETE FROM notification_outbox WHERE id IN (
           SELECT id FROM notification_outbox ORDER BY id LIMIT ${FAN_OUT_BATCH} FOR UPDATE SKIP LOCKED)
         RETURNING *),
       m AS (
         INSERT INTO notification_messages (event_id, endpoint_id, team_id, type, run_id, payload, event_at, next_attempt_at)
         SELECT ev.id, e.id, ev.team_id, ev.type, ev.run_id, ev.payload, ev.created_at,
                ev.created_at + make_interval(secs => $1::double precision / 1000)
           FROM ev JOIN notification_endpoints e ON e.team_id = ev.team_id AND e.enabled
          WHERE (e.factory_id IS NULL OR e.factory_id = ev.factory_id)
            AND (cardinality(e.event_types) = 0 OR ev.type = ANY(e.event_types))
          ORDER BY ev.id
         ON CONFLICT DO NOTHING)
       SELECT count(*)::int AS events FROM ev`,
        [firstAttemptDelayMs],
      );
    });
    return row?.events ?? 0;
  }

  /**
   * Claims up to `max` due messages of enabled endpoints for one attempt each: leased until
   * `leaseUntil` (another replica's claim skips them; a lease that lapses, the process died, makes
   * them due again). A message waits while an earlier message of the same run to the same endpoint is
   * pending: in order per run.
   */
  claimDue(now: Date, leaseUntil: Date, max: number): Promise<DueMessage[]> {
    return this.db.query<DueMessage>(
      `WITH picked AS MATERIALIZED (
         SELECT m.id FROM notification_messages m JOIN notification_endpoints e ON e.id = m.endpoint_id AND e.enabled
          WHERE m.status = 'pending' AND m.next_attempt_at <= $1 AND (m.leased_until IS NULL OR m.leased_until < $1)
            AND (m.run_id IS NULL OR NOT EXISTS (
                  SELECT 1 FROM notification_messages p
                   WHERE p.endpoint_id = m.endpoint_id AND p.run_id = m.run_id AND p.status = 'pending' AND p.event_id < m.event_id))
          ORDER BY m.next_attempt_at, m.event_id LIMIT $3 FOR UPDATE OF m SKIP LOCKED)
       UPDATE notification_messages m SET leased_until = $2, attempts = m.attempts + 1
         FROM picked, notification_endpoints e
        WHERE m.id = picked.id AND e.id = m.endpoint_id
       RETURNING m.id, m.event_id, m.endpoint_id, m.type, m.run_id, m.payload, m.event_at, m.status, m.attempts,
                 m.next_attempt_at, m.created_at, m.delivered_at, e.url, e.secret, e.secret_version_id`,
      [now, leaseUntil, max],
    );
  }

  /**
   * Records successful attempts (one statement for a whole batch): the attempt log, the messages
   * delivered, and their endpoints' runs of failures ended.
   */
  async recordDelivered(done: Array<{ m: DueMessage; outcome: AttemptOutcome }>, at: Date): Promise<void> {
    if (!done.length) return;
    await this.db.execute(
      `WITH a AS (
         INSERT INTO notification_attempts (message_id, endpoint_id, attempted_at, succeeded, status_code, latency_ms, response_excerpt)
         SELECT t.m, t.e, $1, true, t.s, t.l, t.x FROM unnest($2::uuid[], $3::uuid[], $4::int[], $5::int[], $6::text[]) AS t(m, e, s, l, x)
          -- A message whose endpoint was deleted during the attempt is gone: nothing to log.
          WHERE EXISTS (SELECT 1 FROM notification_messages n WHERE n.id = t.m)),
       d AS (
         UPDATE notification_messages SET status = 'delivered', delivered_at = $1, leased_until = NULL, next_attempt_at = NULL
          WHERE id = ANY($2::uuid[]))
       UPDATE notification_endpoints SET consecutive_failures = 0
        WHERE id = ANY($3::uuid[]) AND consecutive_failures <> 0`,
      [
        at,
        done.map((d) => d.m.id),
        done.map((d) => d.m.endpoint_id),
        done.map((d) => d.outcome.statusCode),
        done.map((d) => d.outcome.latencyMs),
        done.map((d) => d.outcome.responseExcerpt),
      ],
    );
  }

  /**
   * Records a failed attempt and its consequence in one transaction: delivered; or due again at `retryAt`;
   * or (no `retryAt`) failed for good, which counts towards disabling the endpoint after
   * `disableAfter` failed messages in a row. Returns whether the endpoint was disabled by it.
   */
  async recordFailed(
    m: DueMessage,
    outcome: AttemptOutcome,
    at: Date,
    retryAt: Date | undefined,
    disableAfter: number,
  ): Promise<{ disabled: boolean }> {
    return this.db.transaction(async (tx: Queryable) => {
      await tx.execute(
        `INSERT INTO notification_attempts (message_id, endpoint_id, attempted_at, succeeded, status_code, latency_ms, error, response_excerpt)
         SELECT $1, $2, $3, false, $4, $5, $6, $7 WHERE EXISTS (SELECT 1 FROM notification_messages WHERE id = $1)`,
        [
          m.id,
          m.endpoint_id,
          at,
          outcome.statusCode,
          outcome.latencyMs,
          outcome.error,
          outcome.responseExcerpt,
        ],
      );
      if (retryAt) {
        await tx.execute(
          `UPDATE notification_messages SET next_attempt_at = $2, leased_until = NULL WHERE id = $1`,
          [m.id, retryAt],
        );
        return { disabled: false };
      }
      await tx.execute(
        `UPDATE notification_messages SET status = 'failed', leased_until = NULL, next_attempt_at = NULL WHERE id = $1`,
        [m.id],
      );
      const [e] = await tx.query<{ enabled: boolean }>(
        `UPDATE notification_endpoints SET consecutive_failures = consecutive_failures + 1,
                enabled = enabled AND consecutive_failures + 1 < $2::int,
                disabled_reason = CASE WHEN consecutive_failures + 1 >= $2::int
                  THEN $2::int::text || ' messages in a row failed every attempt' ELSE disabled_reason END
          WHERE id = $1 RETURNING enabled`,
        [m.endpoint_id, disableAfter],
      );
      return { disabled: e ? !e.enabled : false };
    });
  }
}
