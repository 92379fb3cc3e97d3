import { DEPTH_CAP, DEPTH_READ } from '../common/metrics.js';
import { Database } from '../database/database.js';
import { StatementParams } from '../database/multi-row.js';
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
  /** When the endpoint's current run of failed attempts began; null while it answers. */
  failing_since: Date | null;
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
  /** The endpoint's: set while its attempts fail. */
  failing_since: Date | null;
}

/** One attempt of a claimed message, as it ended. */
export interface AttemptRecord {
  m: DueMessage;
  outcome: AttemptOutcome;
  at: Date;
  /** When a failed message is due again; absent: delivered, or (failed) given up. */
  retryAt?: Date;
}

/** What one endpoint's claimed messages came to, and the state the endpoint is left in. */
export interface EndpointOutcome {
  endpointId: string;
  /** The messages attempted; those claimed and not attempted (held back) are left as they were. */
  attempts: AttemptRecord[];
  /** Set while the endpoint's attempts fail: since when (undefined: it answered). */
  failingSince?: Date;
  /** No attempt to the endpoint before this. */
  heldUntil: Date;
  /**
   * The claim that took the messages: the record applies only while the endpoint is still under it. A
   * record so late that the lease lapsed and another dispatcher claimed the endpoint (and may have
   * delivered and recorded the same messages) must change neither that one's messages nor the endpoint.
   */
  claimId: string;
}

/**
 * `held_until` of an endpoint whose failing spell a re-enable ends (PATCH, a factory apply): free for
 * the next look, unless a round of its is in flight (`claim_id` is set until the round is recorded).
 * That round keeps its lease: released early, the endpoint was claimed again beside it, and its
 * messages went twice at once (a run's later message before the earlier one was answered). The
 * round's record then releases it as the round's outcome says. A lease that lapsed stays lapsed.
 */
// Qualified: in an upsert's DO UPDATE a bare name is ambiguous.
export const HELD_UNLESS_IN_FLIGHT = `CASE WHEN notification_endpoints.claim_id IS NULL THEN NULL
  ELSE notification_endpoints.held_until END`;

const ENDPOINT_COLUMNS = `id, team_id, factory_id, name, url, event_types, description, secret, enabled,
  disabled_reason, consecutive_failures, failing_since, created_at, updated_at`;
const MESSAGE_COLUMNS = `id, event_id, endpoint_id, type, run_id, payload, event_at, status, attempts,
  next_attempt_at, created_at, delivered_at`;

/**
 * Endpoints, messages and attempts (docs/notifications.md). Messages are made by triggers on `runs`
 * and `deliveries`, in the state change's transaction (migration NotificationMessagesAtTheChange),
 * never here.
 */
export class NotificationsRepository {
  constructor(private readonly db: Database) {}

  /** For /metrics: messages waiting for an attempt (the pending ones), counted up to DEPTH_CAP. */
  async pendingMessages(): Promise<number> {
    const [row] = await this.db.queryWithin<{ pending: number }>(
      DEPTH_READ,
      `SELECT count(*)::int AS pending FROM (SELECT 1 FROM notification_messages WHERE status = 'pending'
                                              LIMIT ${DEPTH_CAP}) m`,
      [],
    );
    return row?.pending ?? 0;
  }

  /**
   * The pause before a message's first attempt, which the triggers that make messages read (they run
   * in the transactions of state changes, outside any dispatcher).
   */
  async setFirstAttemptDelay(ms: number): Promise<void> {
    await this.db.query(`UPDATE notification_settings SET first_attempt_delay_ms = $1`, [ms]);
  }

  /** Inserts the endpoint unless its name is taken or, made by the API, the team has `maxApiEndpoints`. */
  async insertEndpoint(
    e: Omit<
      EndpointRow,
      'created_at' | 'updated_at' | 'consecutive_failures' | 'disabled_reason' | 'failing_since'
    >,
    maxApiEndpoints: number,
  ): Promise<EndpointRow | undefined> {
    const [row] = await this.db.query<EndpointRow>(
      `INSERT INTO notification_endpoints (id, team_id, factory_id, name, url, event_types, description, secret, enabled)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9
        WHERE $3::uuid IS NOT NULL
           OR (SELECT count(*) FROM notification_endpoints WHERE team_id = $2 AND factory_id IS NULL) < $10
       ON CONFLICT (team_id, name) DO NOTHING RETURNING ${ENDPOINT_COLUMNS}`,
      [
        e.id,
        e.team_id,
        e.factory_id,
        e.name,
        e.url,
        e.event_types,
        e.description,
        e.secret,
        e.enabled,
        maxApiEndpoints,
      ],
    );
    return row;
  }

  /** The endpoints a team made through the API (a factory's are bounded by its definition's limits). */
  async countApiEndpoints(teamId: string): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notification_endpoints WHERE team_id = $1 AND factory_id IS NULL`,
      [teamId],
    );
    return row!.n;
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
              failing_since = CASE WHEN $7 THEN NULL ELSE failing_since END,
              held_until = CASE WHEN $7 THEN ${HELD_UNLESS_IN_FLIGHT} ELSE held_until END,
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
        ORDER BY event_id DESC LIMIT $2`,
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

  /**
   * A message goes out again now, with the whole retry schedule ahead of it (resend). A failing
   * endpoint's retry is brought forward to now: its oldest pending message goes first, as always, so
   * that message is due now too. Not while a round of the endpoint is in flight (see
   * HELD_UNLESS_IN_FLIGHT): that round's outcome decides when it goes next, and a delivery then lets
   * the resent message go at once.
   */
  async resend(endpointId: string, messageId: string, now: Date): Promise<MessageRow | undefined> {
    const [row] = await this.db.query<MessageRow>(
      `WITH m AS (
         UPDATE notification_messages SET status = 'pending', attempts = 0, next_attempt_at = $3
          WHERE id = $2 AND endpoint_id = $1 RETURNING ${MESSAGE_COLUMNS}),
       e AS (
         UPDATE notification_endpoints SET held_until = $3
          WHERE id = $1 AND failing_since IS NOT NULL AND held_until > $3 AND claim_id IS NULL
            AND EXISTS (SELECT 1 FROM m)
         RETURNING id),
       -- The resent message is left to m (a row is changed once a statement).
       oldest AS (
         UPDATE notification_messages SET next_attempt_at = $3
          WHERE id = (SELECT id FROM notification_messages WHERE endpoint_id = $1 AND status = 'pending'
                       ORDER BY event_id LIMIT 1)
            AND id <> $2 AND next_attempt_at > $3 AND EXISTS (SELECT 1 FROM e))
       SELECT * FROM m`,
      [endpointId, messageId, now],
    );
    return row;
  }

  /**
   * Claims due messages for one attempt each, endpoint by endpoint: up to `perEndpoint` of an endpoint
   * that is not failing (`limits` may lower it for some endpoints), only its oldest pending message
   * (when due) of one that is; none of an endpoint that is held (a failing endpoint before its retry,
   * or attempts in flight). What is claimed is the endpoint: it is held until `leaseUntil`
   * (`held_until`) under the claim `claimId`, under its row lock (SKIP LOCKED), so one dispatcher at a
   * time, here or in another process, sends to it and its messages need no lease of their own. Once the attempts are recorded
   * the endpoint is released; if the process died first the lease lapses and the messages, still
   * pending, are due again (at least once). At most `max` messages in all, endpoints in the order they
   * were last released (round robin).
   *
   * In order per run: a message is claimed only if every earlier pending message of its run to that
   * endpoint is claimed with it (the caller sends a run's messages one after another, in event order).
   * The result is ordered by endpoint, then event.
   *
   * Planned for its values on every call: a plan prepared while the messages table was small (a fresh
   * start, a burst) walked all of it on every claim until the table was next analysed.
   */
  claimDue(
    now: Date,
    leaseUntil: Date,
    claimId: string,
    max: number,
    perEndpoint: number,
    limits: ReadonlyMap<string, number> = new Map(),
  ): Promise<DueMessage[]> {
    return this.db.query<DueMessage>(
      `WITH ready AS MATERIALIZED (
         SELECT e.id, e.failing_since IS NOT NULL AS failing FROM notification_endpoints e
          WHERE e.enabled AND (e.held_until IS NULL OR e.held_until <= $1)
            -- Asked of each endpoint that may go, in its own part of the index (a subquery, never a
            -- join): as EXISTS, the planner read every endpoint's due messages, a held endpoint's
            -- backlog of thousands among them, to learn which endpoints have any. Its earliest pending
            -- message, not "any due one": with statistics that knew of such a backlog, "any" was
            -- sought by reading the table from its start, where the backlog lies (150,000 rows read
            -- by every claim, of every team); the earliest is one entry of the index, and no other
            -- plan can find it without reading all of the endpoint's pending messages. A failing
            -- endpoint goes only when its oldest message is due (the one it would take): asked when
            -- any was due, one whose newer messages were due while its oldest waited for a retry
            -- looked ready to every claim, and took nothing — each claim, of every team, reading its
            -- backlog for that oldest message (now one entry of the endpoint's queue index).
            AND CASE WHEN e.failing_since IS NULL
                  THEN (SELECT m.next_attempt_at FROM notification_messages m
                         WHERE m.endpoint_id = e.id AND m.status = 'pending'
                         ORDER BY m.next_attempt_at LIMIT 1)
                  ELSE (SELECT m.next_attempt_at FROM notification_messages m
                         WHERE m.endpoint_id = e.id AND m.status = 'pending'
                         ORDER BY m.event_id LIMIT 1)
                END <= $1
          ORDER BY e.held_until NULLS FIRST, e.id LIMIT $3 FOR NO KEY UPDATE SKIP LOCKED),
       candidate AS MATERIALIZED (
         SELECT m.id, r.id AS endpoint_id, m.run_id, m.event_id FROM ready r CROSS JOIN LATERAL (
           (SELECT m.id, m.run_id, m.event_id FROM notification_messages m
             WHERE NOT r.failing AND m.endpoint_id = r.id AND m.status = 'pending' AND m.next_attempt_at <= $1
             ORDER BY m.next_attempt_at, m.event_id LIMIT coalesce(($5::jsonb ->> r.id::text)::int, $4))
           UNION ALL
           -- A failing endpoint takes its queue in order: the oldest pending message goes first and alone.
           (SELECT o.id, o.run_id, o.event_id FROM (
              SELECT m.id, m.run_id, m.event_id, m.next_attempt_at FROM notification_messages m
               WHERE r.failing AND m.endpoint_id = r.id AND m.status = 'pending'
               ORDER BY m.event_id LIMIT 1) o
             WHERE o.next_attempt_at <= $1)) m
          LIMIT $3),
       picked AS MATERIALIZED (
         SELECT c.id, c.endpoint_id FROM candidate c
          WHERE c.run_id IS NULL OR NOT EXISTS (
                -- "Pending" as the run-order index says it, which no other index matches: from
                -- another (the planner's pick when statistics took them all for empty), this read all
                -- of the endpoint's pending messages for each message taken.
                SELECT 1 FROM notification_messages p
                 WHERE p.endpoint_id = c.endpoint_id AND p.run_id = c.run_id
                   AND p.status <> 'delivered' AND p.status <> 'failed'
                   AND p.event_id < c.event_id AND p.id NOT IN (SELECT id FROM candidate))),
       held AS (
         UPDATE notification_endpoints e SET held_until = $2, claim_id = $6 WHERE e.id IN (SELECT endpoint_id FROM picked))
       SELECT m.id, m.event_id, m.endpoint_id, m.type, m.run_id, m.payload, m.event_at, m.status, m.attempts,
              m.next_attempt_at, m.created_at, m.delivered_at, e.url, e.secret, e.secret_version_id, e.failing_since
         FROM picked
              -- Each taken message by its id (LIMIT: never flattened into a join). As a join, with
              -- statistics that knew of an endpoint with tens of thousands of due messages, the planner
              -- expected thousands taken and hashed the whole table — every team's messages — for them.
              CROSS JOIN LATERAL (SELECT * FROM notification_messages m WHERE m.id = picked.id LIMIT 1) m
              JOIN notification_endpoints e ON e.id = m.endpoint_id
        ORDER BY m.endpoint_id, m.event_id`,
      [now, leaseUntil, max, perEndpoint, JSON.stringify(Object.fromEntries(limits)), claimId],
      { planEachTime: true },
    );
  }

  /**
   * Records what became of claimed messages, one statement for any number of endpoints: the attempt
   * log; each attempted message delivered, due again at its `retry_at`, or (neither) failed for good,
   * and its attempt counted (messages held back were not attempted: nothing of theirs changes); and
   * each endpoint: released (`held_until`), failing or not, its run of failed messages (a failed one
   * counts towards disabling it after `disableAfter` in a row, a delivery ends the run). Returns the
   * endpoints this disabled. Planned for its values on every call (see claimDue).
   *
   * Only under the claim that took them: an endpoint whose `claim_id` is no longer the outcome's was
   * claimed by another dispatcher once the lease lapsed, and that one owns its messages now (it may
   * have sent them again, delivered them and recorded it). Such an outcome's attempts are logged (they
   * were made) and change nothing else: not the messages, whose state their owner records, nor the
   * endpoint's lease, failing spell, run of failures or enabled flag. And a message changes only
   * while it is pending: a claim that commits while this statement runs may have its messages changed
   * by it, but what that claim records then wins, and a delivered message is never pending again.
   *
   * "Pending" is said as "neither delivered nor failed" (the status has no other value), which no
   * partial index of pending messages matches. Written `status = 'pending'`, it let the planner hash
   * the whole of one on every record (every endpoint's pending messages, a failing endpoint's backlog
   * of thousands among them) rather than reach the recorded messages through the primary key: a
   * vacuum in a calm spell had found those indexes empty, and the planner took them for empty still.
   * One team's backlog slowed every team's deliveries.
   */
  async recordAttempts(outcomes: EndpointOutcome[], disableAfter: number): Promise<string[]> {
    if (!outcomes.length) return [];
    const p = new StatementParams();
    const attempts = p.rows(
      't',
      {
        message_id: 'uuid',
        endpoint_id: 'uuid',
        attempted_at: 'timestamptz',
        succeeded: 'boolean',
        status_code: 'int',
        latency_ms: 'int',
        error: 'text',
        response_excerpt: 'text',
        retry_at: 'timestamptz',
      },
      outcomes.flatMap((o) =>
        o.attempts.map(({ m, outcome, at, retryAt }) => ({
          message_id: m.id,
          endpoint_id: o.endpointId,
          attempted_at: at,
          succeeded: outcome.succeeded,
          status_code: outcome.statusCode,
          latency_ms: outcome.latencyMs,
          error: outcome.error,
          response_excerpt: outcome.responseExcerpt,
          retry_at: retryAt ?? null,
        })),
      ),
    );
    const endpoints = p.rows(
      's',
      {
        endpoint_id: 'uuid',
        delivered: 'boolean',
        given_up: 'int',
        failing_since: 'timestamptz',
        held_until: 'timestamptz',
        claim_id: 'uuid',
      },
      outcomes.map((o) => ({
        endpoint_id: o.endpointId,
        delivered: o.attempts.some((a) => a.outcome.succeeded),
        given_up: o.attempts.filter((a) => !a.outcome.succeeded && !a.retryAt).length,
        failing_since: o.failingSince ?? null,
        held_until: o.heldUntil,
        claim_id: o.claimId,
      })),
    );
    const limit = p.add(disableAfter);
    const rows = await this.db.query<{ id: string; disabled: boolean }>(
      `WITH t AS MATERIALIZED (SELECT * FROM ${attempts}),
       -- The endpoints still under this record's claim, with their run of failures before it.
       s AS MATERIALIZED (
         SELECT s.*, CASE WHEN s.delivered THEN 0 ELSE e.consecutive_failures END + s.given_up AS run
           FROM ${endpoints} JOIN notification_endpoints e ON e.id = s.endpoint_id AND e.claim_id = s.claim_id),
       ended AS (
         UPDATE notification_messages m SET
                status = CASE WHEN t.succeeded THEN 'delivered' WHEN t.retry_at IS NULL THEN 'failed' ELSE 'pending' END,
                attempts = m.attempts + 1,
                delivered_at = CASE WHEN t.succeeded THEN t.attempted_at ELSE m.delivered_at END,
                next_attempt_at = CASE WHEN t.succeeded THEN NULL ELSE t.retry_at END
           FROM t JOIN s ON s.endpoint_id = t.endpoint_id
          WHERE m.id = t.message_id AND m.status NOT IN ('delivered', 'failed') RETURNING m.id),
       -- Another dispatcher's claim now: the attempts are only logged, of the messages that still exist
       -- (locked against a delete meanwhile, as the update locks the others).
       late AS (
         SELECT m.id FROM t JOIN notification_messages m ON m.id = t.message_id
          WHERE t.endpoint_id NOT IN (SELECT endpoint_id FROM s) FOR KEY SHARE OF m),
       -- Only messages that still exist: one whose endpoint was deleted during the attempt is gone.
       logged AS (
         INSERT INTO notification_attempts (message_id, endpoint_id, attempted_at, succeeded, status_code, latency_ms, error, response_excerpt)
         SELECT t.message_id, t.endpoint_id, t.attempted_at, t.succeeded, t.status_code, t.latency_ms, t.error, t.response_excerpt
           FROM t WHERE t.message_id IN (SELECT id FROM ended UNION ALL SELECT id FROM late))
       -- Released as the round's outcome says (a re-enable or a resend meanwhile left the lease alone).
       UPDATE notification_endpoints e SET claim_id = NULL, held_until = s.held_until,
              failing_since = s.failing_since,
              consecutive_failures = s.run, enabled = e.enabled AND s.run < ${limit}::int,
              disabled_reason = CASE WHEN s.run >= ${limit}::int
                THEN ${limit}::int::text || ' messages in a row failed every attempt' ELSE e.disabled_reason END
         FROM s WHERE e.id = s.endpoint_id AND e.claim_id = s.claim_id
       RETURNING e.id, s.given_up > 0 AND s.run >= ${limit}::int AND s.run - s.given_up < ${limit}::int AS disabled`,
      p.values,
      { planEachTime: true },
    );
    return rows.filter((r) => r.disabled).map((r) => r.id);
  }

  /**
   * Deletes settled messages (delivered, or failed for good) created before `before`, their attempts
   * with them (ON DELETE CASCADE), `batch` at a time so no statement holds many locks or runs long.
   * Returns how many went. Pending messages stay whatever their age.
   */
  async pruneSettled(before: Date, batch = 5000): Promise<number> {
    let pruned = 0;
    for (;;) {
      const [row] = await this.db.query<{ n: number }>(
        `WITH gone AS (
           DELETE FROM notification_messages WHERE id IN (
             SELECT id FROM notification_messages
              WHERE status <> 'pending' AND created_at < $1
              ORDER BY created_at LIMIT $2)
           RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [before, batch],
      );
      pruned += row?.n ?? 0;
      if ((row?.n ?? 0) < batch) return pruned;
    }
  }
}
