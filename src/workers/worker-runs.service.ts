import type { Database, Queryable } from '../database/database.js';
import { nextState } from '../runs/run-state.js';
import type { RunsRepository } from '../runs/runs.repository.js';
import type { Config } from '../config/config.js';
import type { EnvironmentResolver } from '../environments/environment-resolver.js';
import type { Assignment, Control, Outcome } from './assignment.js';
import type { HarnessEvent } from './harness-protocol.js';
import {
  forgottenBefore,
  harnessEnd,
  idleMinutes,
  isHeld,
  lapsedLeaseEnd,
  leaseEnd,
  liveSince,
  lostWorkerEnd,
  overdueClaimedBefore,
  overdueEnd,
  startedAt,
  workerEnd,
  type RunEnd,
  type RunPolicy,
} from './run-decisions.js';
import { RunEventsRepository } from './run-events.repository.js';
import { RunArtifacts } from '../runs/run-artifacts.repository.js';
import { artifactReports } from './artifact-events.js';
import { handoffAttachments } from '../runs/artifact.js';
import { RunQueueRepository, type ClaimedRun, type HeldRun } from './run-queue.repository.js';
import { SkillResolver } from './skill-resolver.js';
import { WorkersRepository, type ConnectedHost, type WorkerIdentity } from './workers.repository.js';

export type { RunPolicy } from './run-decisions.js';
export type { WorkerIdentity } from './workers.repository.js';

export const runPolicy = (config: Config): RunPolicy => ({
  leaseMs: config.workerLeaseSeconds * 1000,
  idleTimeoutMinutes: config.runIdleTimeoutMinutes,
  maxDurationMinutes: config.runMaxDurationMinutes,
  minuteMs: config.idleMinuteMs,
  teamMaxSlots: config.teamMaxSlots,
});

const isArtifact = (e: HarnessEvent) => e.type === 'action' && e.kind === 'artifact';

/**
 * Run execution as the workers drive it: claim, lease, events, control, end, and the reaper. The
 * decisions are run-decisions.ts's; the reads and writes are the queue's (RunQueueRepository), the
 * conversation's (RunEventsRepository) and the registry's. Every state change but the claim goes
 * through RunsRepository.transition (the state machine, compare-and-set).
 */
export class WorkerRunsService {
  private readonly queue: RunQueueRepository;
  private readonly events = new RunEventsRepository();
  private readonly registry: WorkersRepository;
  private readonly skills: SkillResolver;
  private readonly artifacts: RunArtifacts;

  constructor(
    private readonly db: Database,
    private readonly runs: RunsRepository,
    private readonly policy: RunPolicy,
    private readonly now: () => Date = () => new Date(),
    /** Resolves runs' environments at their claim; absent: runs start in an empty workspace. */
    private readonly environments?: EnvironmentResolver,
  ) {
    this.queue = new RunQueueRepository(db);
    this.registry = new WorkersRepository(db);
    this.artifacts = new RunArtifacts(db);
    this.skills = new SkillResolver(this.queue);
  }

  register(w: WorkerIdentity): Promise<void> {
    return this.registry.register(w, this.now());
  }

  unregister(w: WorkerIdentity): Promise<void> {
    return this.registry.unregister(w);
  }

  connectedSelfHosted(teamId: string): Promise<ConnectedHost[]> {
    return this.registry.connectedSelfHosted(teamId, liveSince(this.now(), this.policy));
  }

  /** Claims up to `max` QUEUED runs of the worker's host (RunQueueRepository.claim) and hands them out. */
  async claim(w: WorkerIdentity, max: number): Promise<Assignment[]> {
    if (max <= 0) return [];
    const now = this.now();
    const rows = await this.queue.claim(w, max, {
      claimed: nextState('QUEUED', 'claim'),
      now,
      leaseEnd: leaseEnd(now, this.policy),
      liveSince: liveSince(now, this.policy),
      teamMaxSlots: this.policy.teamMaxSlots,
    });
    if (rows.length) this.runs.changed();
    return Promise.all(rows.map((r) => this.assignment(r, w)));
  }

  private async assignment(run: ClaimedRun, w: WorkerIdentity): Promise<Assignment> {
    // Handed to the worker that claimed the run, for its harness (FACTORYD_AGENT_CONFIG): the only
    // place MCP credentials are opened.
    const config = this.runs.configForHarness(run.id, run.agent_config ?? {});
    let basePrompt = typeof config.base_prompt === 'string' ? config.base_prompt : undefined;
    if (run.skill_spec) {
      const skill = await this.skills.resolve(run.team_id, run.skill_spec);
      if (skill) basePrompt = basePrompt ? `${skill}\n\n${basePrompt}` : skill;
    }
    const env = await this.environments?.forRun(
      run.team_id,
      typeof config.environment_id === 'string' ? config.environment_id : undefined,
    );
    // What the run used, as resolved; the worker adds the commits it checked out when it ends.
    if (env) await this.environments!.record(run.id, env.environment);
    return {
      ...(env
        ? {
            environment: env.environment,
            ...('problem' in env
              ? { environment_problem: env.problem }
              : { environment_secrets: env.secretValues }),
          }
        : {}),
      run_id: run.id,
      team_id: run.team_id,
      execution: run.execution,
      session_id: run.session_id,
      prompt: run.prompt,
      base_prompt: basePrompt,
      agent_config: config,
      followups: run.followups ?? [],
      attachments: await this.attachments(run),
      skills: run.skills ?? [],
      history: run.history ?? [],
      idle_timeout_minutes: idleMinutes(config, this.policy) || undefined,
      max_duration_minutes: this.policy.maxDurationMinutes || undefined,
      // A self-hosted machine runs its own HARNESS_COMMAND: the service never tells it what to execute.
      harness_command: (w.teamId === null && run.harness_command) || undefined,
    };
  }

  /**
   * The run's attachments, and for a continued run the files left as handoff, under `handoff/` (they
   * replace an attachment of the same name): from its previous execution (execution 2 on), or for a
   * new run of a conversation from the conversation's previous run. Read with the run's own team: no
   * other team's files.
   */
  private async attachments(run: ClaimedRun): Promise<Assignment['attachments']> {
    // PostgreSQL's base64 wraps lines every 76 characters
    const own = (run.attachments ?? []).map((a) => ({
      file_name: a.file_name,
      data: a.data.replace(/\n/g, ''),
    }));
    const from = run.execution > 1 ? run.id : await this.artifacts.predecessor(run.team_id, run.id);
    if (!from) return own;
    const handoff = handoffAttachments(await this.artifacts.handoffFiles(run.team_id, from));
    const names = new Set(handoff.map((h) => h.file_name));
    return [...own.filter((a) => !names.has(a.file_name)), ...handoff];
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
    const inserted = await this.events.append(this.db, runId, execution, events, this.now(), w.id);
    if (!inserted) return;
    this.runs.changed();
    const artifacts = events.filter(isArtifact).map((e) => (e as { input: Record<string, unknown> }).input);
    if (artifacts.length) await this.runs.addArtifacts(this.db, runId, artifacts);
    await this.artifacts.record(this.db, runId, execution, artifactReports(events), this.now());
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
      const run = await this.queue.lock(tx, runId);
      if (!run || run.lease_owner !== w.id || !isHeld(run.state)) return { stop: true, followups: [] };
      const followups = await this.events.deliverFollowups(tx, runId, run.execution, this.now());
      if (followups.length) tx.afterCommit(() => this.runs.changed());
      if (followups.length && run.state === 'BLOCKED') {
        await this.runs.transition(tx, runId, 'BLOCKED', 'resume', this.now());
        await this.runs.clearStatusMessage(tx, runId);
      }
      return { stop: false, followups };
    });
  }

  async heartbeat(w: WorkerIdentity, runIds: string[]): Promise<void> {
    await this.register(w);
    await this.queue.renew(w.id, runIds, leaseEnd(this.now(), this.policy));
  }

  /** The harness ended: its exit decides SUCCEEDED or FAILED, unless the run moved on (cancelled, lost). */
  async finish(w: WorkerIdentity, runId: string, execution: number, outcome: Outcome): Promise<void> {
    if (outcome.commits?.length) await this.environments?.recordCommits(runId, w.id, outcome.commits);
    let events = outcome.events ?? [];
    // Events that change the run besides the end (an artifact, BLOCKED) go through `record` first.
    if (events.some((e) => e.type === 'status' || e.type === 'artifact' || isArtifact(e))) {
      await this.record(w, runId, execution, events);
      events = [];
    }
    // The usual end, in one statement: a run whose harness exited by itself (harnessEnd), its last
    // events inserted by the same statement.
    if (!outcome.stoppedBy) {
      const { from, path, statusMessage } = harnessEnd(outcome);
      const now = this.now();
      const last = events;
      const ended = await this.runs.transition(this.db, runId, from, path, now, {
        statusMessage,
        leaseOwner: w.id,
        startedAt: outcome.startedMsAgo !== undefined ? startedAt(now, outcome.startedMsAgo) : undefined,
        with: last.length
          ? (first) => this.events.appendPart(runId, execution, last, now, w.id, first)
          : undefined,
      });
      if (ended) return;
      events = []; // recorded by that statement even though the run had moved on
    }
    if (events.length) await this.record(w, runId, execution, events);
    await this.db.transaction(async (tx) => {
      const run = await this.queue.lock(tx, runId);
      if (!run || run.lease_owner !== w.id || run.execution !== execution) return;
      await this.queue.release(tx, runId);
      if (!isHeld(run.state)) return;
      const now = this.now();
      const end = workerEnd(
        { state: run.state, agentConfig: run.agent_config ?? {} },
        outcome,
        w.id,
        this.policy,
      );
      await this.runs.transition(tx, runId, run.state, end.path, now, {
        statusMessage: end.statusMessage,
        ...(outcome.startedMsAgo !== undefined ? { startedAt: startedAt(now, outcome.startedMsAgo) } : {}),
      });
    });
  }

  /**
   * Runs held longer than RUN_MAX_DURATION_MINUTES end as FAILED (max_duration). Every worker stops
   * such a run itself; this is for a worker that does not (an older or a modified one), a lease
   * later, so that a worker that does is never overtaken. Returns how many.
   */
  async endOverdue(): Promise<number> {
    const before = overdueClaimedBefore(this.now(), this.policy);
    if (!before) return 0;
    return this.db.transaction(async (tx) =>
      this.end(tx, await this.queue.claimedBefore(tx, before), (r) => overdueEnd(r.state, this.policy)),
    );
  }

  /** Runs whose lease lapsed end as ERROR (retryable); returns how many. */
  async reap(): Promise<number> {
    return this.db.transaction(async (tx) =>
      this.end(tx, await this.queue.lapsed(tx, this.now()), lapsedLeaseEnd),
    );
  }

  /**
   * Earlier workers of `w`'s host (and team) that died: a worker restarted on their machine found
   * them gone. Their runs end as ERROR (retryable) at once, not a lease later. Returns how many.
   */
  async lost(w: WorkerIdentity, workerIds: string[]): Promise<number> {
    if (!workerIds.length) return 0;
    return this.db.transaction(async (tx) =>
      this.end(tx, await this.queue.heldBy(tx, w, workerIds), lostWorkerEnd),
    );
  }

  /** Ends held runs the service took from their workers (`end` from each), their leases released. */
  private async end(tx: Queryable, rows: HeldRun[], end: (r: HeldRun) => RunEnd): Promise<number> {
    const now = this.now();
    for (const r of rows) {
      const { path, statusMessage } = end(r);
      await this.runs.transition(tx, r.id, r.state, path, now, { statusMessage });
      await this.queue.release(tx, r.id);
    }
    return rows.length;
  }

  /** QUEUED runs for a self-hosted host that no connected worker serves say so; long-gone workers are forgotten. */
  async markUnservedHosts(): Promise<void> {
    const now = this.now();
    await this.queue.noteUnservedHosts(liveSince(now, this.policy));
    await this.registry.forget(forgottenBefore(now, this.policy));
  }
}
