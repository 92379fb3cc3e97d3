import { paramRefs, type Database, type Queryable, type StatementPart } from '../database/database.js';
import { nextState, sqlStates, statesAllowing, type RunEvent, type RunState } from '../runs/run-state.js';
import { skillName } from '../runs/runs.service.js';
import type { RunsRepository } from '../runs/runs.repository.js';
import type { Config } from '../config/config.js';
import type { Assignment, Control, Outcome } from './assignment.js';
import type { HarnessEvent } from './harness-protocol.js';
import { RunArtifacts } from '../runs/run-artifacts.repository.js';
import { artifactAction, artifactReports } from './artifact-events.js';

/** Who is asking: a worker process, serving one worker host (for one team when self-hosted). */
export interface WorkerIdentity {
  id: string;
  host: string;
  /** Self-hosted workers are scoped to the team of their API key; service-hosted ones serve all. */
  teamId: string | null;
  /** A service-hosted worker's slots: counted in the total that teams share (the registry). */
  slots?: number;
}

/** The service's rules for running runs (from the environment: `runPolicy(config)`). */
export interface RunPolicy {
  leaseMs: number;
  /** Given to a run without `idle_timeout_minutes` (0: none). */
  idleTimeoutMinutes: number;
  /** The longest one execution may run (0: no limit). */
  maxDurationMinutes: number;
  /** How long one minute of these limits lasts (shortened by tests only). */
  minuteMs: number;
  /** Service-hosted slots one team may hold (unless it has its own); undefined: all but one when other teams exist. */
  teamMaxSlots?: number;
}

export const runPolicy = (config: Config): RunPolicy => ({
  leaseMs: config.workerLeaseSeconds * 1000,
  idleTimeoutMinutes: config.runIdleTimeoutMinutes,
  maxDurationMinutes: config.runMaxDurationMinutes,
  minuteMs: config.idleMinuteMs,
  teamMaxSlots: config.teamMaxSlots,
});

const HELD: RunState[] = ['CLAIMED', 'INPROGRESS', 'BLOCKED'];
/** In statements' texts (sqlStates says why): a run is claimed from these, and held in HELD. */
const CLAIMABLE_SQL = sqlStates(statesAllowing('claim'));
const HELD_SQL = sqlStates(HELD);

interface ClaimedRow {
  id: string;
  team_id: string;
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
}

type StatusMessage = { message: string; error_code?: string; retryable?: boolean };

interface HeldRun {
  id: string;
  state: RunState;
  lease_owner: string;
  lease_expires_at: Date;
}

const isArtifact = (e: HarnessEvent) => e.type === 'action' && e.kind === 'artifact';

/** The worker measured `msAgo`; a negative or absurd figure (a broken worker) counts as now. */
function startedAt(now: Date, msAgo: number): Date {
  return new Date(now.getTime() - (msAgo >= 0 && msAgo < 86_400_000 ? msAgo : 0));
}

/** How a harness that exited by itself ends its run: exit 0 succeeds, anything else fails with its last lines. */
function endOf(outcome: Outcome): ['succeed' | 'fail', StatusMessage] {
  if (outcome.exitCode === 0)
    return ['succeed', { message: outcome.result?.message || 'The agent finished' }];
  const tail = outcome.lastLines.slice(-LAST_LINES_IN_MESSAGE).join('\n');
  const how =
    outcome.exitCode === null ? `was killed by ${outcome.signal}` : `exited with status ${outcome.exitCode}`;
  return ['fail', { message: `The agent ${how}${tail ? `:\n${tail}` : ''}`, error_code: 'agent_failed' }];
}

function eventColumns(events: HarnessEvent[]) {
  const out = {
    types: [] as string[],
    roles: [] as (string | null)[],
    kinds: [] as (string | null)[],
    bodies: [] as string[],
  };
  for (const e of events) {
    // An artifact is an `artifact` action in the conversation, its content left out (run_artifacts has it).
    const event = e.type === 'artifact' ? artifactAction(e.artifact) : e;
    out.types.push(event.type);
    out.roles.push(event.type === 'message' ? event.role : event.type === 'transcript' ? event.stream : null);
    out.kinds.push(event.type === 'action' ? event.kind : null);
    out.bodies.push(JSON.stringify(event.type === 'action' ? { input: event.input } : event));
  }
  return out;
}
const LAST_LINES_IN_MESSAGE = 5;

/**
 * The database side of run execution: claim, lease, events, control, end, and the reaper. Every
 * state change goes through RunsRepository.transition (the state machine, compare-and-set).
 */
export class WorkerRunsService {
  private readonly leaseMs: number;
  private readonly artifacts: RunArtifacts;

  constructor(
    private readonly db: Database,
    private readonly runs: RunsRepository,
    private readonly policy: RunPolicy,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.leaseMs = policy.leaseMs;
    this.artifacts = new RunArtifacts(db);
  }

  async register(w: WorkerIdentity): Promise<void> {
    const now = this.now();
    await this.db.execute(
      `INSERT INTO workers (id, worker_host, team_id, self_hosted, connected_at, last_seen_at, slots)
       VALUES ($1, $2, $3, $4, $5, $5, $6)
       ON CONFLICT (id) DO UPDATE SET last_seen_at = $5, slots = $6`,
      [w.id, w.host, w.teamId, w.teamId !== null, now, w.slots ?? 0],
    );
  }

  async unregister(w: WorkerIdentity): Promise<void> {
    await this.db.execute(`DELETE FROM workers WHERE id = $1`, [w.id]);
  }

  /**
   * Claims up to `max` QUEUED runs of the worker's host and gathers what their harnesses need, in one
   * statement: follow-ups taken (and recorded in the conversation), attachments, the team's skills,
   * the conversation so far. A self-hosted worker takes its own team's oldest runs. Service-hosted
   * workers share their slots fairly (FAIR_PICK). SKIP LOCKED: claimers never wait on each other's
   * rows. It is the one state change that cannot go through RunsRepository.transition (a batch decided
   * by the lock), so it takes its states from the state machine itself.
   */
  async claim(w: WorkerIdentity, max: number): Promise<Assignment[]> {
    if (max <= 0) return [];
    const now = this.now();
    const params = [
      w.host,
      max,
      nextState('QUEUED', 'claim'),
      now,
      w.id,
      new Date(now.getTime() + this.leaseMs),
    ];
    const rows =
      w.teamId !== null
        ? await this.db.query<ClaimedRow>(claimStatement(OWN_TEAM_PICK), [...params, w.teamId])
        : // Service-hosted claims take turns (across replicas: a lock in the database), so that each
          // counts what the claims before it took: concurrent claims would each see a team under its
          // cap and together take it over.
          await this.db.queryLocked<ClaimedRow>(SERVICE_CLAIM_LOCK, claimStatement(FAIR_PICK), [
            ...params,
            w.slots ?? 1,
            new Date(now.getTime() - this.leaseMs),
            this.policy.teamMaxSlots ?? null,
          ]);
    return Promise.all(rows.map((r) => this.assignment(r, w)));
  }

  private async assignment(run: ClaimedRow, w: WorkerIdentity): Promise<Assignment> {
    // Handed to the worker that claimed the run, for its harness (FACTORYD_AGENT_CONFIG): the only
    // place MCP credentials are opened.
    const config = this.runs.configForHarness(run.id, run.agent_config ?? {});
    let basePrompt = typeof config.base_prompt === 'string' ? config.base_prompt : undefined;
    if (run.skill_spec) {
      const skill = await this.resolveSkill(run.team_id, run.skill_spec);
      if (skill) basePrompt = basePrompt ? `${skill}\n\n${basePrompt}` : skill;
    }
    return {
      run_id: run.id,
      team_id: run.team_id,
      execution: run.execution,
      session_id: run.session_id,
      prompt: run.prompt,
      base_prompt: basePrompt,
      agent_config: config,
      followups: run.followups ?? [],
      // PostgreSQL's base64 wraps lines every 76 characters
      attachments: (run.attachments ?? []).map((a) => ({
        file_name: a.file_name,
        data: a.data.replace(/\n/g, ''),
      })),
      skills: run.skills ?? [],
      history: run.history ?? [],
      idle_timeout_minutes: idleMinutes(config, this.policy) || undefined,
      max_duration_minutes: this.policy.maxDurationMinutes || undefined,
      // A self-hosted machine runs its own HARNESS_COMMAND: the service never tells it what to execute.
      harness_command: (w.teamId === null && run.harness_command) || undefined,
    };
  }

  /**
   * `owner/repo:name` or `owner/repo:path/SKILL.md` → the skill's text, from a factory of the team
   * whose repository is owner/repo (or, for a local factory, whose name is repo).
   */
  async resolveSkill(teamId: string, spec: string): Promise<string | undefined> {
    const [repo, rest] = spec.split(':', 2);
    if (!rest) return undefined;
    const name = skillName(spec);
    const rows = await this.db.query<{ content: string; repo_url: string; fname: string; path: string }>(
      `SELECT s.content, f.repo_url, f.name AS fname, s.path FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL AND (s.path = $2 OR s.name = $3)`,
      [teamId, rest, name],
    );
    const repoName = repo.split('/')[1] ?? repo;
    const matches = (r: { repo_url: string; fname: string }) =>
      r.repo_url
        .replace(/\.git$/, '')
        .replace(/\/+$/, '')
        .endsWith(repo) || r.fname === repoName;
    const exact = rows.filter(matches).find((r) => r.path === rest) ?? rows.filter(matches)[0];
    return exact?.content;
  }

  /**
   * A worker's report of events; with `startedMsAgo` (its first report), the run turns INPROGRESS
   * first, `started_at` being when the harness started by the worker's own measure (no clock skew).
   */
  async record(
    w: WorkerIdentity,
    runId: string,
    execution: number,
    events: HarnessEvent[],
    startedMsAgo?: number,
  ): Promise<void> {
    if (startedMsAgo !== undefined) {
      const now = this.now();
      await this.runs.transition(this.db, runId, 'CLAIMED', 'start', now, {
        leaseOwner: w.id,
        startedAt: startedAt(now, startedMsAgo),
      });
    }
    if (!events.length) return;
    const inserted = await this.insertEvents(this.db, runId, execution, events, w.id);
    if (!inserted) return;
    const legacy = events.filter(isArtifact).map((e) => (e as { input: Record<string, unknown> }).input);
    await this.artifacts.record(this.db, runId, execution, artifactReports(events), legacy, this.now());
    const blocked = events.find((e) => e.type === 'status');
    if (blocked)
      await this.runs.transition(this.db, runId, 'INPROGRESS', 'block', this.now(), {
        statusMessage: { message: blocked.message },
        leaseOwner: w.id,
      });
  }

  /** Follow-ups not yet delivered (a BLOCKED run resumes), or `stop` when the run is no longer ours. */
  async control(w: WorkerIdentity, runId: string): Promise<Control> {
    return this.db.transaction(async (tx) => {
      const run = await lockLease(tx, runId);
      if (!run || run.lease_owner !== w.id || !HELD.includes(run.state)) return { stop: true, followups: [] };
      const followups = await this.takeFollowups(tx, runId, run.execution);
      if (followups.length && run.state === 'BLOCKED') {
        await this.runs.transition(tx, runId, 'BLOCKED', 'resume', this.now());
        await tx.execute(`UPDATE runs SET status_message = NULL WHERE id = $1`, [runId]);
      }
      return { stop: false, followups };
    });
  }

  async heartbeat(w: WorkerIdentity, runIds: string[]): Promise<void> {
    const now = this.now();
    await this.register(w);
    if (runIds.length)
      await this.db.execute(
        `UPDATE runs SET lease_expires_at = $3 WHERE id = ANY($1::uuid[]) AND lease_owner = $2 AND state IN (${HELD_SQL})`,
        [runIds, w.id, new Date(now.getTime() + this.leaseMs)],
      );
  }

  /** The harness ended: its exit decides SUCCEEDED or FAILED, unless the run moved on (cancelled, lost). */
  async finish(w: WorkerIdentity, runId: string, execution: number, outcome: Outcome): Promise<void> {
    let events = outcome.events ?? [];
    // Events that change the run besides the end (an artifact, BLOCKED) go through `record` first.
    if (events.some((e) => e.type === 'status' || e.type === 'artifact' || isArtifact(e))) {
      await this.record(w, runId, execution, events);
      events = [];
    }
    // The usual end, in one statement: a run whose harness exited by itself, from INPROGRESS, or
    // from CLAIMED when the whole run fitted in this one report (start and end in one update), its
    // last events inserted by the same statement.
    if (!outcome.stoppedBy) {
      const [event, message] = endOf(outcome);
      const now = this.now();
      const short = outcome.startedMsAgo !== undefined;
      const ended = await this.runs.transition(
        this.db,
        runId,
        short ? 'CLAIMED' : 'INPROGRESS',
        short ? ['start', event] : event,
        now,
        {
          statusMessage: message,
          leaseOwner: w.id,
          startedAt: short ? startedAt(now, outcome.startedMsAgo!) : undefined,
          with: events.length ? (first) => eventsPart(runId, execution, events, w.id, now, first) : undefined,
        },
      );
      if (ended) return;
      events = []; // recorded by that statement even though the run had moved on
    }
    if (events.length) await this.record(w, runId, execution, events);
    await this.db.transaction(async (tx) => {
      const run = await lockLease(tx, runId);
      if (!run || run.lease_owner !== w.id || run.execution !== execution) return;
      await tx.execute(`UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [runId]);
      if (!HELD.includes(run.state)) return;
      const now = this.now();
      let state = run.state;
      const step = async (
        event: RunEvent,
        message?: { message: string; error_code?: string; retryable?: boolean },
      ) => {
        const next = await this.runs.transition(tx, runId, state, event, now, {
          ...(message ? { statusMessage: message } : {}),
          ...(outcome.startedMsAgo !== undefined ? { startedAt: startedAt(now, outcome.startedMsAgo) } : {}),
        });
        if (next) state = next;
      };
      if (outcome.stoppedBy === 'shutdown') {
        return step('lose', {
          message: `The worker ${w.id} shut down while running this run`,
          error_code: 'worker_lost',
          retryable: true,
        });
      }
      if (state === 'BLOCKED') await step('resume');
      if (state === 'CLAIMED') await step('start');
      if (outcome.stoppedBy === 'idle') {
        const minutes = idleMinutes(run.agent_config ?? {}, this.policy);
        const source =
          typeof run.agent_config?.idle_timeout_minutes === 'number'
            ? "the run's idle_timeout_minutes"
            : 'RUN_IDLE_TIMEOUT_MINUTES, the default when the run sets no idle_timeout_minutes';
        return step('fail', {
          message: `The agent was idle (no output, no input) for longer than idle_timeout_minutes (${minutes} minute(s): ${source}) and was stopped`,
          error_code: 'idle_timeout',
        });
      }
      if (outcome.stoppedBy === 'max_duration')
        return step('fail', this.overDuration('its worker stopped it'));
      const [event, message] = endOf(outcome);
      return step(event, message);
    });
  }

  /**
   * Runs held longer than RUN_MAX_DURATION_MINUTES end as FAILED (max_duration). Every worker stops
   * such a run itself; this is for a worker that does not (an older or a modified one), a lease
   * later, so that a worker that does is never overtaken. Returns how many.
   */
  async endOverdue(): Promise<number> {
    const { maxDurationMinutes, minuteMs } = this.policy;
    if (!maxDurationMinutes) return 0;
    const claimedBefore = new Date(this.now().getTime() - maxDurationMinutes * minuteMs - this.leaseMs);
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<HeldRun>(
        `SELECT id, state, lease_owner, lease_expires_at FROM runs
          WHERE state IN (${HELD_SQL}) AND claimed_at < $1 ORDER BY claimed_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
        [claimedBefore],
      );
      const message = this.overDuration('its worker did not stop it, so the service ended the run');
      return this.end(
        tx,
        rows,
        (r) => (r.state === 'BLOCKED' ? ['resume', 'fail'] : ['fail']),
        () => message,
      );
    });
  }

  private overDuration(how: string): StatusMessage {
    return {
      message: `The run reached the maximum run duration of ${this.policy.maxDurationMinutes} minute(s) (RUN_MAX_DURATION_MINUTES) and was stopped; ${how}`,
      error_code: 'max_duration',
    };
  }

  /** Runs whose lease lapsed end as ERROR (retryable); returns how many. */
  async reap(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<HeldRun>(
        `SELECT id, state, lease_owner, lease_expires_at FROM runs
          WHERE state IN (${HELD_SQL}) AND lease_expires_at < $1 ORDER BY lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
        [this.now()],
      );
      return this.lose(tx, rows, (r) => ({
        message: `The worker ${r.lease_owner} stopped renewing its lease (expired ${r.lease_expires_at.toISOString()}); the run was lost`,
        error_code: 'lease_expired',
        retryable: true,
      }));
    });
  }

  /**
   * Earlier workers of `w`'s host (and team) that died: a worker restarted on their machine found
   * them gone. Their runs end as ERROR (retryable) at once, not a lease later. Returns how many.
   */
  async lost(w: WorkerIdentity, workerIds: string[]): Promise<number> {
    if (!workerIds.length) return 0;
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<HeldRun>(
        `SELECT id, state, lease_owner, lease_expires_at FROM runs
          WHERE state IN (${HELD_SQL}) AND lease_owner = ANY($1::text[]) AND worker_host = $2
            AND ($3::uuid IS NULL OR team_id = $3) FOR UPDATE SKIP LOCKED`,
        [workerIds, w.host, w.teamId],
      );
      return this.lose(tx, rows, (r) => ({
        message: `The worker ${r.lease_owner} died while running this run (found gone when a worker restarted on its machine); its harness died with it, so the run was lost`,
        error_code: 'worker_lost',
        retryable: true,
      }));
    });
  }

  private lose(tx: Queryable, rows: HeldRun[], why: (r: HeldRun) => StatusMessage): Promise<number> {
    return this.end(tx, rows, () => ['lose'], why);
  }

  /** Ends held runs the service took from their workers (`path` from their state), their leases cleared. */
  private async end(
    tx: Queryable,
    rows: HeldRun[],
    path: (r: HeldRun) => RunEvent[],
    why: (r: HeldRun) => StatusMessage,
  ): Promise<number> {
    const now = this.now();
    for (const r of rows) {
      await this.runs.transition(tx, r.id, r.state, path(r), now, { statusMessage: why(r) });
      await tx.execute(`UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [r.id]);
    }
    return rows.length;
  }

  /** QUEUED runs for a self-hosted host that no connected worker serves say so in their status message. */
  async markUnservedHosts(): Promise<void> {
    const seenAfter = new Date(this.now().getTime() - this.leaseMs);
    await this.db.execute(
      `UPDATE runs r SET status_message = jsonb_build_object('message',
              'Waiting for self-hosted worker "' || r.worker_host || '": no worker with this id is connected')
        WHERE r.state = 'QUEUED' AND r.worker_host <> 'warp' AND r.status_message IS NULL
          AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                            AND w.last_seen_at > $1)`,
      [seenAfter],
    );
    await this.db.execute(
      `UPDATE runs r SET status_message = NULL
        WHERE r.state = 'QUEUED' AND r.worker_host <> 'warp' AND r.status_message->>'message' LIKE 'Waiting for self-hosted worker%'
          AND EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                        AND w.last_seen_at > $1)`,
      [seenAfter],
    );
    await this.db.execute(`DELETE FROM workers WHERE last_seen_at < $1`, [
      new Date(seenAfter.getTime() - 3600_000),
    ]);
  }

  async connectedSelfHosted(
    teamId: string,
  ): Promise<
    Array<{ worker_host: string; connection_count: number; connected_at: string; last_seen_at: string }>
  > {
    const rows = await this.db.query<{
      worker_host: string;
      n: string;
      connected_at: Date;
      last_seen_at: Date;
    }>(
      `SELECT worker_host, count(*) AS n, min(connected_at) AS connected_at, max(last_seen_at) AS last_seen_at
         FROM workers WHERE team_id = $1 AND self_hosted AND last_seen_at > $2
        GROUP BY worker_host ORDER BY worker_host`,
      [teamId, new Date(this.now().getTime() - this.leaseMs)],
    );
    return rows.map((r) => ({
      worker_host: r.worker_host,
      connection_count: Number(r.n),
      connected_at: r.connected_at.toISOString(),
      last_seen_at: r.last_seen_at.toISOString(),
    }));
  }

  private async takeFollowups(tx: Queryable, runId: string, execution: number): Promise<string[]> {
    const rows = await tx.query<{ message: string; created_at: Date }>(
      `UPDATE run_followups SET delivered_at = $2
        WHERE id IN (SELECT id FROM run_followups WHERE run_id = $1 AND delivered_at IS NULL ORDER BY created_at FOR UPDATE)
        RETURNING message, created_at`,
      [runId, this.now()],
    );
    const messages = rows.sort((a, b) => +a.created_at - +b.created_at).map((r) => r.message);
    await this.insertEvents(
      tx,
      runId,
      execution,
      messages.map((text) => ({ type: 'message', role: 'user', text })),
    );
    return messages;
  }

  /** Appends events to a run's execution, in order; with `leaseOwner`, only while that worker holds it. */
  private async insertEvents(
    q: Queryable,
    runId: string,
    execution: number,
    events: HarnessEvent[],
    leaseOwner?: string,
  ): Promise<number> {
    if (!events.length) return 0;
    const part = eventsPart(runId, execution, events, leaseOwner, this.now(), 1);
    const [row] = await q.query<{ n: number }>(
      `WITH ${part.ctes} SELECT count(*)::int AS n FROM new_events`,
      part.params,
    );
    return row!.n;
  }
}

/** `insertEvents` as a CTE (`new_events`) of a larger statement, parameters numbered from `$first`. */
function eventsPart(
  runId: string,
  execution: number,
  events: HarnessEvent[],
  leaseOwner: string | undefined,
  now: Date,
  first: number,
): StatementPart {
  const cols = eventColumns(events);
  const $ = paramRefs(first);
  return {
    ctes: `new_events AS (
       INSERT INTO run_events (run_id, team_id, execution, type, role, kind, body, created_at)
       SELECT r.id, r.team_id, ${$(3)}, e.type, e.role, e.kind, e.body, ${$(4)}
         FROM runs r, unnest(${$(5)}::text[], ${$(6)}::text[], ${$(7)}::text[], ${$(8)}::jsonb[]) WITH ORDINALITY AS e(type, role, kind, body, n)
        WHERE r.id = ${$(1)} AND r.execution = ${$(3)} AND (${$(2)}::text IS NULL OR r.lease_owner = ${$(2)})
        ORDER BY e.n
       RETURNING 1)`,
    params: [runId, leaseOwner ?? null, execution, now, cols.types, cols.roles, cols.kinds, cols.bodies],
  };
}

interface LockedRun {
  state: RunState;
  lease_owner: string;
  execution: number;
  agent_config: Record<string, unknown> | null;
}

/** A run's state and lease, locked for the rest of the transaction (a worker's control and end). */
async function lockLease(tx: Queryable, runId: string): Promise<LockedRun | undefined> {
  const [run] = await tx.query<LockedRun>(
    `SELECT state, lease_owner, execution, agent_config FROM runs WHERE id = $1 FOR UPDATE`,
    [runId],
  );
  return run;
}

/** A run's idle limit: its own `idle_timeout_minutes`, else the service's default (0: none). */
function idleMinutes(config: Record<string, unknown>, policy: RunPolicy): number {
  return typeof config.idle_timeout_minutes === 'number'
    ? config.idle_timeout_minutes
    : policy.idleTimeoutMinutes;
}

/** An advisory lock key: service-hosted claims take it in turn (any constant no other lock uses). */
const SERVICE_CLAIM_LOCK = 7_146_110_001;

/**
 * A self-hosted worker's pick: the oldest QUEUED runs of its host in its team ($7). Parameters of
 * every pick: $1 host, $2 max; the claim's own are $3–$6 (claimStatement).
 */
const OWN_TEAM_PICK = `
  SELECT id FROM runs WHERE state IN (${CLAIMABLE_SQL}) AND worker_host = $1 AND team_id = $7
   ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED`;

/**
 * The service-hosted pick: fair shares of the slots. Each team with queued runs (found by skipping
 * through the queue index team by team) may hold up to its cap: the team's own max_slots, else
 * TEAM_MAX_SLOTS ($9), else every slot but one when other teams exist — so that a team that fills
 * the slots with runs that hang still leaves one for the next team's run — and no cap for a lone
 * team (NULL: `least` ignores it). Not `total` for a lone team: a run whose harness ended still
 * counts as held until its worker's report lands, so that cap held free slots empty. The slots are those of every live service-hosted worker in the registry (other replicas'
 * and this worker's own $7; seen after $8). Runs are taken in turns: a team's n-th oldest queued run
 * has turn `held + n`, so the team holding least goes first and a burst is shared out round-robin;
 * ties go to the oldest run. The best turns are locked by id (`= ANY(ARRAY(…))`): joined to `runs`
 * instead, the planner guessed many candidates and read the whole table to match them.
 */
const FAIR_PICK = `
  WITH RECURSIVE queued_teams(team_id) AS (
     (SELECT team_id FROM runs WHERE state IN (${CLAIMABLE_SQL}) AND worker_host = $1 ORDER BY team_id LIMIT 1)
     UNION ALL
     SELECT (SELECT r.team_id FROM runs r WHERE r.state IN (${CLAIMABLE_SQL}) AND r.worker_host = $1 AND r.team_id > q.team_id
              ORDER BY r.team_id LIMIT 1)
       FROM queued_teams q WHERE q.team_id IS NOT NULL),
   slots AS (
     SELECT $7::int + coalesce(sum(w.slots), 0)::int AS total FROM workers w
      WHERE w.team_id IS NULL AND w.worker_host = $1 AND w.id <> $5 AND w.last_seen_at > $8),
   shares AS MATERIALIZED (
     SELECT q.team_id, held.n AS held,
            coalesce(t.max_slots, $9::int, CASE WHEN EXISTS (SELECT 1 FROM teams o WHERE o.id <> q.team_id)
                                                THEN greatest(s.total - 1, 1) END) AS cap
       FROM queued_teams q JOIN teams t ON t.id = q.team_id CROSS JOIN slots s
       CROSS JOIN LATERAL (SELECT count(*)::int AS n FROM runs h
                            WHERE h.state IN (${HELD_SQL}) AND h.worker_host = $1 AND h.team_id = q.team_id) held),
   candidates AS MATERIALIZED (
     SELECT c.id, sh.held + c.n AS turn, c.created_at
       FROM shares sh CROSS JOIN LATERAL (
         SELECT r.id, r.created_at, row_number() OVER (ORDER BY r.created_at) AS n
           FROM runs r WHERE r.state IN (${CLAIMABLE_SQL}) AND r.worker_host = $1 AND r.team_id = sh.team_id
          ORDER BY r.created_at LIMIT greatest(least($2::int, sh.cap - sh.held), 0)) c)
  SELECT id FROM runs
   WHERE id = ANY(ARRAY(SELECT id FROM candidates ORDER BY turn, created_at LIMIT $2)) AND state IN (${CLAIMABLE_SQL})
     FOR UPDATE SKIP LOCKED`;

/**
 * The claim around a pick (the ids of the runs to claim, locked): $3 the claimed state, $4 now, $5 the
 * lease owner, $6 the lease's end.
 */
function claimStatement(pick: string): string {
  // `picked` is materialized: as `id IN (… LIMIT n FOR UPDATE SKIP LOCKED)` the planner may rescan
  // the locking subquery once per row, each rescan skipping the rows just updated, and claim them all.
  // Its rows are locked in a claimable state, so the update finds them by id (the primary key).
  return `WITH picked AS MATERIALIZED (${pick}),
       c AS (
         UPDATE runs r SET state = $3, updated_at = $4, lease_owner = $5, lease_expires_at = $6, claimed_at = $4,
                execution = r.execution + 1, session_id = coalesce(r.session_id, gen_random_uuid()), status_message = NULL
           FROM picked WHERE r.id = picked.id
          RETURNING r.id, r.team_id, r.prompt, r.agent_config, r.execution, r.session_id, r.skill_spec),
       f AS (
         UPDATE run_followups u SET delivered_at = $4 FROM c WHERE u.run_id = c.id AND u.delivered_at IS NULL
         RETURNING u.run_id, u.message, u.created_at),
       opening AS (
         INSERT INTO run_events (run_id, team_id, execution, type, role, body, created_at)
         SELECT m.run_id, m.team_id, m.execution, 'message', 'user',
                jsonb_build_object('type', 'message', 'role', 'user', 'text', m.text), $4
           FROM (SELECT c.id AS run_id, c.team_id, c.execution, c.prompt AS text, 0 AS k, $4::timestamptz AS at FROM c WHERE c.execution = 1
                 UNION ALL
                 SELECT f.run_id, c.team_id, c.execution, f.message, 1, f.created_at FROM f JOIN c ON c.id = f.run_id) m
          ORDER BY m.run_id, m.k, m.at)
       SELECT c.*,
         (SELECT json_agg(f.message ORDER BY f.created_at) FROM f WHERE f.run_id = c.id) AS followups,
         (SELECT json_agg(json_build_object('file_name', a.file_name, 'data', encode(a.content, 'base64')) ORDER BY a.file_name)
            FROM run_attachments a WHERE a.run_id = c.id) AS attachments,
         (SELECT json_agg(json_build_object('factory', fa.name, 'path', s.path, 'content', s.content) ORDER BY fa.name, s.path)
            FROM factory_skills s JOIN factories fa ON fa.id = s.factory_id
           WHERE fa.team_id = c.team_id AND s.deleted_at IS NULL) AS skills,
         (SELECT json_agg(json_build_object('role', e.role, 'text', e.body->>'text') ORDER BY e.id)
            FROM run_events e WHERE e.run_id = c.id AND e.type = 'message' AND c.execution > 1) AS history,
         (SELECT t.harness_command FROM teams t WHERE t.id = c.team_id) AS harness_command
       FROM c`;
}
