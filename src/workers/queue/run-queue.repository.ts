import { DEPTH_CAP, DEPTH_READ } from '../../common/metrics.js';
import type { Database, Queryable } from '../../database/database.js';
import { namedParams, type NamedParams } from '../../database/named-params.js';
import { sqlStates, sqlStatesOtherThan, statesAllowing, type RunState } from '../../runs/run-state.js';
import { SERVICE_WORKER_HOST } from '../../runs/run.js';
import { HELD_STATES } from './run-decisions.js';
import { harnessTypesOf, type WorkerIdentity } from './workers.repository.js';
import { cliCommand } from '../../common/cli-command.js';
import type { TeamBaseUrls } from '../../harnesses/base-url.js';

/** In statements' texts (sqlStates says why): a run is claimed from these, and held in HELD_STATES. */
const CLAIMABLE_SQL = sqlStates(statesAllowing('claim'));
/** Every other state: the picked runs are locked by id, "claimable" checked as none of these (sqlStatesOtherThan says why). */
const UNCLAIMABLE_SQL = sqlStatesOtherThan(statesAllowing('claim'));
const HELD_SQL = sqlStates([...HELD_STATES]);

/** A claimed run with what its harness needs, as the claim statement returns it. */
export interface ClaimedRun {
  id: string;
  team_id: string;
  team_name: string;
  prompt: string;
  agent_config: Record<string, unknown> | null;
  execution: number;
  session_id: string;
  skill_spec: string | null;
  followups: string[] | null;
  attachments: Array<{ file_name: string; data: string }> | null;
  skills: Array<{ factory: string; path: string; content: string }> | null;
  history: Array<{ role: string; text: string }> | null;
  harness_command: string | null;
  /** The team's default harness type (teams set-harness --type); NULL: `oz`. */
  team_harness: string | null;
  /** The team's own base URLs by provider (teams set-base-url); NULL: the operator's. */
  team_base_urls: TeamBaseUrls | null;
  /** When the run last turned QUEUED (its `updated_at` before the claim): how long it waited. */
  queued_at: Date;
}

/** What the queue holds now, as the metrics show it (QUEUED counted up to DEPTH_CAP, held runs up to HELD_CAP). */
export interface QueueDepths {
  /** Live runs by state and whether they run on service-hosted workers; `overdue`: held past the longest an execution may take. */
  live: Array<{ state: RunState; service: boolean; runs: number; overdue: number }>;
  /** Held runs whose lease lapsed. */
  leaseLapsed: number;
}

/** Held runs are as many as the workers' slots; past this many, a scrape stops counting them. */
const HELD_CAP = 10_000;

/** A held run the service is taking from its worker (locked). */
export interface HeldRun {
  id: string;
  state: RunState;
  lease_owner: string;
  lease_expires_at: Date;
}

/** A run's state and lease, locked (a worker's control and end). */
export interface LeasedRun {
  state: RunState;
  lease_owner: string;
  execution: number;
  agent_config: Record<string, unknown> | null;
  /** An interrupt asked for this execution and not yet handed to the worker (RunsRepository.requestInterrupt). */
  interrupt_execution: number | null;
}

/** At most this many runs are taken from their workers per housekeeping pass. */
const BATCH = 100;

/**
 * The run queue: the runs table as workers see it, one statement a method. A worker claims QUEUED
 * runs (taking a lease), renews the lease while it runs them, and releases it when the run ends;
 * the service finds the runs whose lease lapsed, that run too long, or whose worker died, to end
 * them. State changes other than the claim go through RunsRepository.transition.
 */
export class RunQueueRepository {
  constructor(private readonly db: Database) {}

  /**
   * Claims up to `max` QUEUED runs of the worker's host and gathers what their harnesses need, in one
   * statement: follow-ups taken (and recorded in the conversation), attachments, the team's skills,
   * the conversation so far. A self-hosted worker takes its own team's oldest runs. Service-hosted
   * workers share their slots fairly (fairPick). SKIP LOCKED: claimers never wait on each other's
   * rows (a self-hosted claim takes NOTES_LOCK shared, so that it waits for the housekeeping's notes
   * instead of skipping the rows they write). It is the one state change that cannot go through RunsRepository.transition (a batch decided
   * by the lock), so it takes its state (`claimed`) from the state machine.
   */
  async claim(
    w: WorkerIdentity,
    max: number,
    at: { claimed: RunState; now: Date; leaseEnd: Date; liveSince: Date; teamMaxSlots?: number },
  ): Promise<ClaimedRun[]> {
    const claim = { host: w.host, max, claimed: at.claimed, now: at.now, owner: w.id, leaseEnd: at.leaseEnd };
    const harnesses = harnessTypesOf(w);
    if (w.teamId !== null)
      return this.db.queryLocked<ClaimedRun>(
        NOTES_LOCK,
        OWN_TEAM_CLAIM,
        OWN_TEAM.values({ ...claim, team: w.teamId, harnesses }),
        'shared',
      );
    // Service-hosted claims take turns (across replicas: a lock in the database), so that each
    // counts what the claims before it took: concurrent claims would each see a team under its
    // cap and together take it over.
    return this.db.queryLocked<ClaimedRun>(
      SERVICE_CLAIM_LOCK,
      FAIR_CLAIM,
      FAIR.values({
        ...claim,
        slots: w.slots ?? 1,
        liveSince: at.liveSince,
        teamMaxSlots: at.teamMaxSlots ?? null,
        harnesses,
      }),
    );
  }

  /** Renews the leases `owner` still holds among `runIds` until `until`. */
  async renew(owner: string, runIds: string[], until: Date): Promise<void> {
    if (!runIds.length) return;
    await this.db.execute(
      `UPDATE runs SET lease_expires_at = $3 WHERE id = ANY($1::uuid[]) AND lease_owner = $2 AND state IN (${HELD_SQL})`,
      [runIds, owner, until],
    );
  }

  /** Clears a run's lease: no worker holds it any more. */
  async release(tx: Queryable, runId: string): Promise<void> {
    await tx.execute(`UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [runId]);
  }

  /** A run's state and lease, locked for the rest of the transaction. */
  async lock(tx: Queryable, runId: string): Promise<LeasedRun | undefined> {
    const [run] = await tx.query<LeasedRun>(
      `SELECT state, lease_owner, execution, agent_config, interrupt_execution FROM runs WHERE id = $1 FOR UPDATE`,
      [runId],
    );
    return run;
  }

  /** The run's pending interrupt was handed to its worker. */
  async interruptTaken(tx: Queryable, runId: string): Promise<void> {
    await tx.execute(`UPDATE runs SET interrupt_execution = NULL WHERE id = $1`, [runId]);
  }

  /**
   * The queue's depths for /metrics, in one statement that reads only the live runs' partial indexes
   * (runs_queue_team for QUEUED, index only; runs_leases for the held runs, their rows once), never
   * the ended runs: its cost follows the live runs, and is capped. `overdueBefore`: held runs claimed
   * before it are overdue (none without a maximum duration).
   */
  async depths(now: Date, overdueBefore: Date | undefined): Promise<QueueDepths> {
    const [row] = await this.db.queryWithin<{ live: QueueDepths['live'] | null; lapsed: number }>(
      DEPTH_READ,
      `SELECT
         (SELECT json_agg(json_build_object('state', d.state, 'service', d.service, 'runs', d.runs, 'overdue', d.overdue))
            FROM (SELECT 'QUEUED' AS state, q.worker_host = $1 AS service, count(*)::int AS runs, 0 AS overdue
                    FROM (SELECT worker_host FROM runs WHERE state = 'QUEUED' LIMIT ${DEPTH_CAP}) q GROUP BY 2
                  UNION ALL
                  SELECT h.state, h.worker_host = $1, count(*)::int, count(*) FILTER (WHERE h.claimed_at < $3)::int
                    FROM (SELECT state, worker_host, claimed_at FROM runs WHERE state IN (${HELD_SQL}) LIMIT ${HELD_CAP}) h
                   GROUP BY 1, 2) d) AS live,
         (SELECT count(*)::int FROM (SELECT 1 FROM runs WHERE state IN (${HELD_SQL}) AND lease_expires_at < $2
                                      LIMIT ${HELD_CAP}) l) AS lapsed`,
      [SERVICE_WORKER_HOST, now, overdueBefore ?? null],
    );
    return { live: row?.live ?? [], leaseLapsed: row?.lapsed ?? 0 };
  }

  /** Held runs whose lease lapsed before `now`, oldest lapse first, locked (the reaper's). */
  lapsed(tx: Queryable, now: Date): Promise<HeldRun[]> {
    return tx.query<HeldRun>(
      `SELECT id, state, lease_owner, lease_expires_at FROM runs
        WHERE state IN (${HELD_SQL}) AND lease_expires_at < $1 ORDER BY lease_expires_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
      [now],
    );
  }

  /** Held runs claimed before `claimedBefore`, oldest first, locked. */
  claimedBefore(tx: Queryable, claimedBefore: Date): Promise<HeldRun[]> {
    return tx.query<HeldRun>(
      `SELECT id, state, lease_owner, lease_expires_at FROM runs
        WHERE state IN (${HELD_SQL}) AND claimed_at < $1 ORDER BY claimed_at LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
      [claimedBefore],
    );
  }

  /** Held runs of `workerIds` on `w`'s host (and team, for a self-hosted worker), locked. */
  heldBy(tx: Queryable, w: WorkerIdentity, workerIds: string[]): Promise<HeldRun[]> {
    return tx.query<HeldRun>(
      `SELECT id, state, lease_owner, lease_expires_at FROM runs
        WHERE state IN (${HELD_SQL}) AND lease_owner = ANY($1::text[]) AND worker_host = $2
          AND ($3::uuid IS NULL OR team_id = $3) FOR UPDATE SKIP LOCKED`,
      [workerIds, w.host, w.teamId],
    );
  }

  /**
   * QUEUED runs for a self-hosted host that no worker seen after `liveSince` serves say so in their
   * status message; the note goes once such a worker is back. In a transaction of its own (see
   * noteUnservedHostsIn).
   */
  async noteUnservedHosts(liveSince: Date): Promise<void> {
    await this.db.transaction((tx) => this.noteUnservedHostsIn(tx, liveSince));
  }

  /**
   * noteUnservedHosts inside `tx` (which must commit or roll back soon: it holds NOTES_LOCK). Writing
   * a note locks the run's row until `tx` ends, and a claim (SKIP LOCKED) passes over locked rows: the
   * note cleared because a worker just came back is on exactly the runs that worker claims next, which
   * then came back empty. So the notes are written under NOTES_LOCK taken exclusively, which
   * self-hosted claims take shared: a claim waits for the notes' short transaction instead of skipping
   * its rows. Only runs whose note changes are written, and none another transaction holds (SKIP
   * LOCKED: a later pass takes them). Both statements read the self-hosted queue's own index
   * (runs_self_hosted_queue), never the service-hosted queue or the whole table. Returns the number
   * of notes written and cleared.
   */
  async noteUnservedHostsIn(tx: Queryable, liveSince: Date): Promise<{ noted: number; cleared: number }> {
    await tx.execute(`SELECT pg_advisory_xact_lock(${NOTES_LOCK})`);
    const noted = await tx.execute(
      `WITH unserved AS MATERIALIZED (
         SELECT r.id FROM runs r
          WHERE ${SELF_HOSTED_QUEUED} AND r.status_message IS NULL
            AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                              AND w.last_seen_at > $1)
            FOR UPDATE OF r SKIP LOCKED)
       UPDATE runs r SET status_message = jsonb_build_object('message',
              'Waiting for self-hosted worker "' || r.worker_host || '": no worker with this id is connected')
         FROM unserved u WHERE r.id = u.id`,
      [liveSince],
    );
    const cleared = await tx.execute(
      `WITH served AS MATERIALIZED (
         SELECT r.id FROM runs r
          WHERE ${SELF_HOSTED_QUEUED} AND r.status_message->>'message' LIKE 'Waiting for self-hosted worker%'
            AND EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                          AND w.last_seen_at > $1)
            FOR UPDATE OF r SKIP LOCKED)
       UPDATE runs r SET status_message = NULL FROM served s WHERE r.id = s.id`,
      [liveSince],
    );
    return { noted, cleared };
  }

  /**
   * QUEUED runs of the service-hosted workers say why none takes them while those refuse to
   * (SingleTeamGate): once each, the oldest `limit` a call, over no status message or over the
   * missing harness's note (not why they wait); the claim that takes one clears it. Under
   * SERVICE_CLAIM_LOCK, so that a claim of another replica, one that confines its harnesses, never
   * passes over a row being noted. Returns how many it noted.
   */
  async noteServiceRefusing(message: string, limit = 1000): Promise<number> {
    const rows = await this.db.queryLocked(
      SERVICE_CLAIM_LOCK,
      `WITH waiting AS MATERIALIZED (
         SELECT id FROM runs WHERE state = 'QUEUED' AND worker_host = $1
            AND (status_message IS NULL OR status_message->>'message' LIKE 'Waiting for a worker with the % harness%')
          ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
       UPDATE runs r SET status_message = jsonb_build_object('message', $2::text)
         FROM waiting w WHERE r.id = w.id RETURNING r.id`,
      [SERVICE_WORKER_HOST, message, limit],
    );
    return rows.length;
  }

  /**
   * QUEUED runs of a built-in harness (claude, codex, gemini) that no live worker of their host has
   * say which harness they wait for; the note goes once such a worker is there (or the claim clears
   * it). Under NOTES_LOCK, as noteUnservedHostsIn and for its reason (a claim must not skip the rows
   * whose note is being cleared). Reads the queued runs through the queue's partial indexes.
   *
   * With `createdFrom`, only the runs created since are looked at, and no note is cleared: what the
   * caller does while the live workers stay the same (see WorkerRunsService.markUnservedHosts). A
   * whole pass reads every queued run, and a backlog of a hundred thousand took a third of a second
   * of the database's CPU a pass, every second, beside the ingress it slowed.
   */
  async noteMissingHarnesses(
    liveSince: Date,
    createdFrom?: Date,
  ): Promise<{ noted: number; cleared: number }> {
    return this.db.transaction(async (tx) => {
      await tx.execute(`SELECT pg_advisory_xact_lock(${NOTES_LOCK})`);
      return this.noteMissingHarnessesIn(tx, liveSince, createdFrom);
    });
  }

  private async noteMissingHarnessesIn(
    tx: Queryable,
    liveSince: Date,
    createdFrom: Date | undefined,
  ): Promise<{ noted: number; cleared: number }> {
    const harness = runHarness('r', 't.harness_type');
    const servedBy = `EXISTS (SELECT 1 FROM workers w WHERE w.last_seen_at > $1 AND w.worker_host = r.worker_host
                       AND (w.team_id IS NULL OR w.team_id = r.team_id)
                       AND coalesce(w.harnesses, '[{"type":"oz"}]') @> jsonb_build_array(jsonb_build_object('type', ${harness})))`;
    // Two statements, not one with an optional bound: a prepared plan reads the queue's index by
    // (worker_host, created_at) only when the bound is there.
    const recent = createdFrom ? `AND r.created_at >= $3` : '';
    const noted = await tx.execute(
      `WITH waiting AS MATERIALIZED (
         SELECT r.id, ${harness} AS harness FROM runs r JOIN teams t ON t.id = r.team_id
          WHERE r.state = 'QUEUED' ${recent} AND r.status_message IS NULL AND ${harness} <> 'oz' AND NOT ${servedBy}
            FOR UPDATE OF r SKIP LOCKED)
       UPDATE runs r SET status_message = jsonb_build_object('message',
              'Waiting for a worker with the ' || w.harness || ' harness: no connected worker has its CLI ' ||
              '(install it where the workers run: ' || $2 || ' ' || w.harness || ')')
         FROM waiting w WHERE r.id = w.id`,
      createdFrom
        ? [liveSince, cliCommand('harnesses install'), createdFrom]
        : [liveSince, cliCommand('harnesses install')],
    );
    if (createdFrom) return { noted, cleared: 0 };
    const cleared = await tx.execute(
      `WITH served AS MATERIALIZED (
         SELECT r.id FROM runs r JOIN teams t ON t.id = r.team_id
          WHERE r.state = 'QUEUED' AND r.status_message->>'message' LIKE 'Waiting for a worker with the % harness%'
            AND ${servedBy}
            FOR UPDATE OF r SKIP LOCKED)
       UPDATE runs r SET status_message = NULL FROM served s WHERE r.id = s.id`,
      [liveSince],
    );
    return { noted, cleared };
  }

  /** The team's live skills at this path or with this name, with their factory (SkillResolver picks one). */
  skillCandidates(teamId: string, path: string, name: string) {
    return this.db.query<{ content: string; repo_url: string; fname: string; path: string }>(
      `SELECT s.content, f.repo_url, f.name AS fname, s.path FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL AND (s.path = $2 OR s.name = $3)`,
      [teamId, path, name],
    );
  }
}

/**
 * Queued runs waiting for a self-hosted host: the predicate of the partial index
 * runs_self_hosted_queue, spelled the same way (a constant, not a parameter) so that a generic plan
 * of the prepared statement can use the index.
 */
const SELF_HOSTED_QUEUED = `r.state = 'QUEUED' AND r.worker_host <> '${SERVICE_WORKER_HOST}'`;

/**
 * An advisory lock key: the "no self-hosted worker" notes take it exclusively, self-hosted claims
 * shared (noteUnservedHostsIn says why).
 */
const NOTES_LOCK = 7_146_110_002;

/** An advisory lock key: service-hosted claims take it in turn (any constant no other lock uses). */
const SERVICE_CLAIM_LOCK = 7_146_110_001;

/**
 * A run's harness type in SQL (harness-types.ts, chooseHarness): its config's, else its team's
 * default (`team`), else `oz`. A worker claims only runs whose harness it has.
 */
const runHarness = (run: string, team: string) =>
  `coalesce(${run}.agent_config->'harness'->>'type', ${team}, 'oz')`;

/**
 * The parameters of every claim: the worker's host, the most runs it takes, and the claim's own
 * (claimStatement): the claimed state, now, the lease's owner and end.
 */
const CLAIM_PARAMS = ['host', 'max', 'claimed', 'now', 'owner', 'leaseEnd'] as const;
type ClaimParams = NamedParams<(typeof CLAIM_PARAMS)[number]>['$'];

/** A self-hosted worker's claim: also its team, and the harnesses it has. */
const OWN_TEAM = namedParams([...CLAIM_PARAMS, 'team', 'harnesses']);

/** A self-hosted worker's pick: the oldest QUEUED runs of its host in its team whose harness it has. */
const ownTeamPick = ($: (typeof OWN_TEAM)['$']) => `
  SELECT r.id, r.updated_at AS queued_at FROM runs r WHERE r.state IN (${CLAIMABLE_SQL}) AND r.worker_host = ${$.host} AND r.team_id = ${$.team}
     AND ${runHarness('r', `(SELECT t.harness_type FROM teams t WHERE t.id = ${$.team})`)} = ANY(${$.harnesses}::text[])
   ORDER BY r.created_at LIMIT ${$.max} FOR UPDATE SKIP LOCKED`;

/**
 * A service-hosted worker's claim: also its own slots, since when a worker counts as live,
 * TEAM_MAX_SLOTS, and the harnesses it has.
 */
const FAIR = namedParams([...CLAIM_PARAMS, 'slots', 'liveSince', 'teamMaxSlots', 'harnesses']);

/**
 * The service-hosted pick: fair shares of the slots. Each team with queued runs (found by skipping
 * through the queue index team by team) may hold up to its cap: the team's own max_slots, else
 * TEAM_MAX_SLOTS, else every slot but one when other teams exist — so that a team that fills
 * the slots with runs that hang still leaves one for the next team's run — and no cap for a lone
 * team (NULL: `least` ignores it). Not `total` for a lone team: a run whose harness ended still
 * counts as held until its worker's report lands, so that cap held free slots empty. The slots are those of every live service-hosted worker in the registry (other replicas'
 * and this worker's own; seen after liveSince). Runs are taken in turns: a team's n-th oldest queued run
 * has turn `held + n`, so the team holding least goes first and a burst is shared out round-robin;
 * among equal turns the team served least recently goes first (`team_slot_turns`, which the claim
 * statement keeps: SERVED_TURNS), never-served teams before all, and only then the oldest run. Not
 * the oldest run alone: two teams whose runs hang, each holding a slot, got every freed slot back
 * (their queues are older) and a third team waited for minutes (issue #32). The best turns are
 * locked by id (`= ANY(ARRAY(…))`): joined to `runs` instead, the planner guessed many candidates
 * and read the whole table to match them.
 */
const fairPick = ($: (typeof FAIR)['$']) => `
  WITH RECURSIVE queued_teams(team_id) AS (
     (SELECT team_id FROM runs WHERE state IN (${CLAIMABLE_SQL}) AND worker_host = ${$.host} ORDER BY team_id LIMIT 1)
     UNION ALL
     SELECT (SELECT r.team_id FROM runs r WHERE r.state IN (${CLAIMABLE_SQL}) AND r.worker_host = ${$.host} AND r.team_id > q.team_id
              ORDER BY r.team_id LIMIT 1)
       FROM queued_teams q WHERE q.team_id IS NOT NULL),
   slots AS (
     SELECT ${$.slots}::int + coalesce(sum(w.slots), 0)::int AS total FROM workers w
      WHERE w.team_id IS NULL AND w.worker_host = ${$.host} AND w.id <> ${$.owner} AND w.last_seen_at > ${$.liveSince}),
   shares AS MATERIALIZED (
     SELECT q.team_id, held.n AS held, t.harness_type, coalesce(st.served, 0) AS served,
            coalesce(t.max_slots, ${$.teamMaxSlots}::int, CASE WHEN EXISTS (SELECT 1 FROM teams o WHERE o.id <> q.team_id)
                                                THEN greatest(s.total - 1, 1) END) AS cap
       FROM queued_teams q JOIN teams t ON t.id = q.team_id CROSS JOIN slots s
       LEFT JOIN team_slot_turns st ON st.team_id = q.team_id
       CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM runs h
                            WHERE h.state IN (${HELD_SQL}) AND h.worker_host = ${$.host} AND h.team_id = q.team_id) held),
   candidates AS MATERIALIZED (
     SELECT c.id, sh.held + c.n AS turn, sh.served, c.created_at
       FROM shares sh CROSS JOIN LATERAL (
         SELECT r.id, r.created_at, row_number() OVER (ORDER BY r.created_at) AS n
           FROM runs r WHERE r.state IN (${CLAIMABLE_SQL}) AND r.worker_host = ${$.host} AND r.team_id = sh.team_id
            AND ${runHarness('r', 'sh.harness_type')} = ANY(${$.harnesses}::text[])
          ORDER BY r.created_at LIMIT greatest(least(${$.max}::int, sh.cap - sh.held), 0)) c)
  SELECT id, updated_at AS queued_at FROM runs
   WHERE id = ANY(ARRAY(SELECT id FROM candidates ORDER BY turn, served, created_at LIMIT ${$.max}))
     AND state NOT IN (${UNCLAIMABLE_SQL})
     FOR UPDATE SKIP LOCKED`;

/**
 * With the fair pick: the teams this claim served, with one new number from `team_slot_turn` (a
 * sequence, so that "least recently" needs no clock; teams served by the same claim tie). Claims of
 * service-hosted workers take turns (SERVICE_CLAIM_LOCK), so no two write a team's row at once.
 */
const SERVED_TURNS = `,
       served AS (
         INSERT INTO team_slot_turns (team_id, served)
         SELECT DISTINCT c.team_id, (SELECT nextval('team_slot_turn')) FROM c
         ON CONFLICT (team_id) DO UPDATE SET served = excluded.served)`;

/** The claim around a pick (the ids of the runs to claim, locked, with when each turned QUEUED). */
function claimStatement($: ClaimParams, pick: string, more = ''): string {
  // `picked` is materialized: as `id IN (… LIMIT n FOR UPDATE SKIP LOCKED)` the planner may rescan
  // the locking subquery once per row, each rescan skipping the rows just updated, and claim them all.
  // Its rows are locked in a claimable state, so the update finds them by id (the primary key).
  return `WITH picked AS MATERIALIZED (${pick}),
       c AS (
         UPDATE runs r SET state = ${$.claimed}, updated_at = ${$.now}, lease_owner = ${$.owner}, lease_expires_at = ${$.leaseEnd}, claimed_at = ${$.now},
                execution = r.execution + 1, session_id = coalesce(r.session_id, gen_random_uuid()), status_message = NULL
           FROM picked WHERE r.id = picked.id
          RETURNING r.id, r.team_id, r.prompt, r.agent_config, r.execution, r.session_id, r.skill_spec, picked.queued_at),
       f AS (
         UPDATE run_followups u SET delivered_at = ${$.now} FROM c WHERE u.run_id = c.id AND u.delivered_at IS NULL
         RETURNING u.run_id, u.message, u.created_at),
       opening AS (
         INSERT INTO run_events (run_id, team_id, execution, type, role, body, created_at)
         SELECT m.run_id, m.team_id, m.execution, 'message', 'user',
                jsonb_build_object('type', 'message', 'role', 'user', 'text', m.text), ${$.now}
           FROM (SELECT c.id AS run_id, c.team_id, c.execution, c.prompt AS text, 0 AS k, ${$.now}::timestamptz AS at FROM c WHERE c.execution = 1
                 UNION ALL
                 SELECT f.run_id, c.team_id, c.execution, f.message, 1, f.created_at FROM f JOIN c ON c.id = f.run_id) m
          ORDER BY m.run_id, m.k, m.at)${more}
       SELECT c.*,
         (SELECT json_agg(f.message ORDER BY f.created_at) FROM f WHERE f.run_id = c.id) AS followups,
         (SELECT json_agg(json_build_object('file_name', a.file_name, 'data', encode(a.content, 'base64')) ORDER BY a.file_name)
            FROM run_attachments a WHERE a.run_id = c.id) AS attachments,
         (SELECT json_agg(json_build_object('factory', fa.name, 'path', s.path, 'content', s.content) ORDER BY fa.name, s.path)
            FROM factory_skills s JOIN factories fa ON fa.id = s.factory_id
           WHERE fa.team_id = c.team_id AND s.deleted_at IS NULL) AS skills,
         (SELECT json_agg(json_build_object('role', e.role, 'text', e.body->>'text') ORDER BY e.id)
            FROM run_events e WHERE e.run_id = c.id AND e.type = 'message' AND c.execution > 1) AS history,
         t.name AS team_name, t.harness_command, t.harness_type AS team_harness, t.harness_base_urls AS team_base_urls
       FROM c JOIN teams t ON t.id = c.team_id`;
}

/** The two claim statements, each one text for every claim (pg prepares it once). */
const OWN_TEAM_CLAIM = claimStatement(OWN_TEAM.$, ownTeamPick(OWN_TEAM.$));
const FAIR_CLAIM = claimStatement(FAIR.$, fairPick(FAIR.$), SERVED_TURNS);
