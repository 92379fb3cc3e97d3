import type { Database, Queryable } from '../../database/database.js';
import type { Metrics } from '../../common/metrics.js';
import { nextState } from '../../runs/run-state.js';
import type { RunsRepository } from '../../runs/runs.repository.js';
import type { Config } from '../../config/config.js';
import type { EnvironmentResolver } from '../../environments/environment-resolver.js';
import type { Assignment, Control, Outcome } from '../protocol/assignment.js';
import type { HarnessEvent } from '../protocol/harness-protocol.js';
import {
  forgottenBefore,
  harnessEnd,
  idleMinutes,
  HELD_STATES,
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
import { RunArtifacts } from '../../runs/run-artifacts.repository.js';
import { RunUsageRepository } from '../../runs/run-usage.repository.js';
import { artifactReports } from './artifact-events.js';
import { handoffAttachments } from '../../runs/artifact.js';
import { RunQueueRepository, type ClaimedRun, type HeldRun } from './run-queue.repository.js';
import { SkillResolver } from './skill-resolver.js';
import { WorkersRepository, type ConnectedHost, type WorkerIdentity } from './workers.repository.js';
import {
  chooseHarness,
  HARNESSES,
  isBuiltInHarness,
  type BuiltInHarness,
} from '../../harnesses/harness-types.js';
import type { DetectedHarness } from '../../config/harness-detection.js';
import { HARNESS_PROVIDER, untrustedInternalBaseUrl } from '../../harnesses/base-url.js';
import type { SecretsService } from '../../secrets/secrets.service.js';
import { setSecretCommand } from '../../secrets/secret-commands.js';

export type { RunPolicy } from './run-decisions.js';
export type { WorkerIdentity } from './workers.repository.js';

export const runPolicy = (config: Config): RunPolicy => ({
  leaseMs: config.workerLeaseSeconds * 1000,
  idleTimeoutMinutes: config.runIdleTimeoutMinutes,
  maxDurationMinutes: config.runMaxDurationMinutes,
  minuteMs: config.idleMinuteMs,
  teamMaxSlots: config.teamMaxSlots,
  transcriptBudget: { bytes: config.runTranscriptMaxBytes, events: config.runTranscriptMaxEvents },
  egressTrusted: config.harnessEgress?.trusted ?? [],
});

/**
 * Why a run whose agent has `auth: {workerEnvironment: true}` does not start on a service-hosted
 * worker: the setting, and what to do instead.
 */
export const workerEnvironmentRefused = (type: BuiltInHarness): string =>
  `the agent's auth.workerEnvironment (the worker's own ${HARNESSES[type].keyVariable}) is honoured only on the team's own ` +
  `self-hosted worker, not on a service-hosted one: set the agent's workerHost to a self-hosted worker of the team, ` +
  `or name a team secret with auth.managedSecret (${setSecretCommand('NAME')} stores one)`;

/** How often the harness notes read every queued run at least, and how far back the others look. */
const NOTES_WHOLE_PASS_MS = 60_000;
const NOTES_OVERLAP_MS = 10_000;

/** The metrics' `workers` label: runs on service-hosted workers, or on a team's self-hosted ones. */
const WORKER_KINDS = ['service', 'self_hosted'] as const;

const sum = (ns: number[]) => ns.reduce((a, b) => a + b, 0);

const isUsage = (e: HarnessEvent): e is Extract<HarnessEvent, { type: 'usage' }> => e.type === 'usage';

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
  private readonly usage: RunUsageRepository;
  /** The last harness-notes pass (see markUnservedHosts). */
  private notes = { offer: '', wholeAt: -Infinity, createdFrom: new Date(0) };

  constructor(
    private readonly db: Database,
    private readonly runs: RunsRepository,
    private readonly policy: RunPolicy,
    private readonly now: () => Date = () => new Date(),
    /** Team secrets: a built-in harness's provider key (none given: a named secret is "unreadable"). */
    private readonly secrets?: SecretsService,
    /** Resolves runs' environments at their claim; absent: runs start in an empty workspace. */
    private readonly environments?: EnvironmentResolver,
    /** The service's metrics (claims, reaps, the queue's depths); absent outside `factoryd serve`. */
    private readonly metrics?: Metrics,
  ) {
    this.queue = new RunQueueRepository(db);
    this.registry = new WorkersRepository(db);
    this.artifacts = new RunArtifacts(db);
    this.usage = new RunUsageRepository(db);
    this.skills = new SkillResolver(this.queue);
    metrics?.addDepthReader(() => this.readDepths(metrics), [metrics.runsByState, metrics.runsOverdue]);
  }

  /** The queue's depths into the metrics' gauges (every state and kind of worker, zero included). */
  private async readDepths(metrics: Metrics): Promise<void> {
    const now = this.now();
    const depths = await this.queue.depths(now, overdueClaimedBefore(now, this.policy));
    for (const state of ['QUEUED', ...HELD_STATES])
      for (const workers of WORKER_KINDS) metrics.runsByState.set({ state, workers }, 0);
    for (const d of depths.live)
      metrics.runsByState.set({ state: d.state, workers: d.service ? 'service' : 'self_hosted' }, d.runs);
    metrics.runsOverdue.set({ reason: 'lease_lapsed' }, depths.leaseLapsed);
    metrics.runsOverdue.set({ reason: 'overdue' }, sum(depths.live.map((d) => d.overdue)));
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

  /**
   * The agent CLIs (HarnessDetection) of the live workers that may run the team's runs: service-hosted
   * ones, on any replica, and the team's own self-hosted ones, as they advertised them on connect,
   * claim and heartbeat. `oz` needs no CLI and is left out.
   */
  async detectedHarnesses(teamId: string): Promise<DetectedHarness[]> {
    const rows = await this.registry.harnessesFor(teamId, liveSince(this.now(), this.policy));
    return rows.flatMap((r) =>
      isBuiltInHarness(r.type)
        ? [{ type: r.type, where: r.where, ...(r.version ? { version: r.version } : {}) }]
        : [],
    );
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
    const workers = w.teamId === null ? 'service' : 'self_hosted';
    this.metrics?.runsClaimed.inc({ workers }, rows.length);
    for (const r of rows)
      this.metrics?.claimWait.observe(
        { workers },
        Math.max(0, now.getTime() - new Date(r.queued_at).getTime()) / 1000,
      );
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
      team_name: run.team_name,
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
      transcript_budget: this.policy.transcriptBudget,
      // A self-hosted machine runs its own HARNESS_COMMAND: the service never tells it what to execute.
      harness_command: (w.teamId === null && run.harness_command) || undefined,
      ...(await this.builtInHarness(run, config, w)),
    };
  }

  /**
   * A run of a built-in harness (claude, codex, gemini): its type and its provider key, the named team
   * secret's current value, opened here for this execution only (the assignment goes to the worker
   * that claimed the run and is stored nowhere). A secret that is missing or cannot be opened is said
   * by name, never its value, and the worker ends the run at once.
   *
   * `workerEnvironment` is honoured only on a team's self-hosted worker (its own machine, its own
   * key). A service-hosted worker serves every team: its environment holds the operator's keys (set
   * for the service, e.g. for a gateway), which no team's run may take by asking for them.
   */
  private async builtInHarness(
    run: ClaimedRun,
    config: Record<string, unknown>,
    w: WorkerIdentity,
  ): Promise<Pick<Assignment, 'harness'>> {
    const choice = chooseHarness(config, run.team_harness);
    if (choice.type === 'oz') return {};
    const info = HARNESSES[choice.type];
    // The team's own base URL for this harness's provider, checked again here: the operator's trust
    // may have changed since it was set.
    const baseUrl = run.team_base_urls?.[HARNESS_PROVIDER[choice.type]];
    const refused = baseUrl && untrustedInternalBaseUrl(baseUrl, this.policy.egressTrusted ?? []);
    if (refused)
      return {
        harness: {
          type: choice.type,
          error: `the team's base URL for ${info.title} (teams set-base-url --provider ${HARNESS_PROVIDER[choice.type]}): ${refused}`,
        },
      };
    const base = baseUrl ? { base_url: baseUrl } : {};
    if (choice.workerEnvironment)
      return {
        harness:
          w.teamId === null
            ? { type: choice.type, error: workerEnvironmentRefused(choice.type) }
            : { type: choice.type, worker_environment: true, ...base },
      };
    const name = choice.secretName;
    if (!name)
      return {
        harness: {
          type: choice.type,
          error:
            `no provider key for ${info.title}: name a team secret holding it in the run's harness.auth_secret_name` +
            `${info.authSecretField ? ` (or harness_auth_secrets.${info.authSecretField})` : ''}, or in the agent's auth.managedSecret ` +
            `(${setSecretCommand('NAME')} stores one); auth.workerEnvironment lets a self-hosted worker supply its own ${info.keyVariable}`,
        },
      };
    const secret = await this.secrets?.current(run.team_id, name).catch(() => undefined);
    if (!secret?.value)
      return {
        harness: {
          type: choice.type,
          secret_name: name,
          error: `the team secret "${name}" (the provider key for ${info.title}) does not exist or cannot be read: store it with ${setSecretCommand(name)}`,
        },
      };
    return {
      harness: { type: choice.type, secret_name: name, env: { [info.keyVariable]: secret.value }, ...base },
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
   * The events are stored as far as the run's transcript budget goes (RunEventsRepository.appendOutput),
   * artifacts among them only if they were; a BLOCKED status changes the run's state in any case.
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
    events = await this.addUsage(w, runId, execution, events);
    if (!events.length) return;
    const { held, kept } = await this.events.appendOutput(
      this.db,
      runId,
      execution,
      events,
      this.now(),
      w.id,
      this.policy.transcriptBudget,
    );
    if (!held) return;
    this.runs.changed();
    const stored = events.slice(0, kept);
    await this.artifacts.record(this.db, runId, execution, artifactReports(stored), this.now());
    const blocked = events.find((e) => e.type === 'status');
    if (blocked)
      await this.runs.transition(this.db, runId, 'INPROGRESS', 'block', this.now(), {
        statusMessage: { message: blocked.message },
        leaseOwner: w.id,
      });
  }

  /**
   * Token usage goes to the run's sums (run_token_usage, while this worker holds the run), never to
   * its conversation; returns the other events.
   */
  private async addUsage(
    w: WorkerIdentity,
    runId: string,
    execution: number,
    events: HarnessEvent[],
  ): Promise<HarnessEvent[]> {
    const usage = events.filter(isUsage);
    if (!usage.length) return events;
    if (await this.usage.add(this.db, runId, execution, usage, this.now(), w.id)) this.runs.changed();
    return events.filter((e) => !isUsage(e));
  }

  /**
   * Follow-ups not yet delivered (a BLOCKED run resumes), an interrupt asked for the execution the
   * worker runs, or `stop` when the run is no longer ours.
   */
  async control(w: WorkerIdentity, runId: string): Promise<Control> {
    return this.db.transaction(async (tx) => {
      const run = await this.queue.lock(tx, runId);
      if (!run || run.lease_owner !== w.id || !isHeld(run.state)) return { stop: true, followups: [] };
      const interrupt = run.interrupt_execution === run.execution && run.state === 'INPROGRESS';
      if (run.interrupt_execution !== null) await this.queue.interruptTaken(tx, runId);
      const followups = await this.events.deliverFollowups(tx, runId, run.execution, this.now());
      if (followups.length) tx.afterCommit(() => this.runs.changed());
      if (followups.length && run.state === 'BLOCKED') {
        await this.runs.transition(tx, runId, 'BLOCKED', 'resume', this.now());
        await this.runs.clearStatusMessage(tx, runId);
      }
      return { stop: false, followups, ...(interrupt ? { interrupt } : {}) };
    });
  }

  async heartbeat(w: WorkerIdentity, runIds: string[]): Promise<void> {
    await this.register(w);
    await this.queue.renew(w.id, runIds, leaseEnd(this.now(), this.policy));
  }

  /** The harness ended: its exit decides SUCCEEDED or FAILED, unless the run moved on (cancelled, lost). */
  async finish(w: WorkerIdentity, runId: string, execution: number, outcome: Outcome): Promise<void> {
    if (outcome.commits?.length) await this.environments?.recordCommits(runId, w.id, outcome.commits);
    // Usage first, while this worker still holds the run.
    let events = await this.addUsage(w, runId, execution, outcome.events ?? []);
    // Events that change the run besides the end (an artifact, BLOCKED) go through `record` first.
    if (events.some((e) => e.type === 'status' || e.type === 'artifact')) {
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
          ? (first) =>
              this.events.appendOutputPart(
                runId,
                execution,
                last,
                now,
                w.id,
                this.policy.transcriptBudget,
                first,
              )
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
      this.end(
        tx,
        await this.queue.claimedBefore(tx, before),
        (r) => overdueEnd(r.state, this.policy),
        'overdue',
      ),
    );
  }

  /** Runs whose lease lapsed end as ERROR (retryable); returns how many. */
  async reap(): Promise<number> {
    return this.db.transaction(async (tx) =>
      this.end(tx, await this.queue.lapsed(tx, this.now()), lapsedLeaseEnd, 'lease_lapsed'),
    );
  }

  /**
   * Earlier workers of `w`'s host (and team) that died: a worker restarted on their machine found
   * them gone. Their runs end as ERROR (retryable) at once, not a lease later. Returns how many.
   */
  async lost(w: WorkerIdentity, workerIds: string[]): Promise<number> {
    if (!workerIds.length) return 0;
    return this.db.transaction(async (tx) =>
      this.end(tx, await this.queue.heldBy(tx, w, workerIds), lostWorkerEnd, 'worker_lost'),
    );
  }

  /**
   * Ends held runs the service took from their workers (`end` from each), their leases released;
   * counted as reaped for `reason` once the transaction commits.
   */
  private async end(
    tx: Queryable,
    rows: HeldRun[],
    end: (r: HeldRun) => RunEnd,
    reason: 'overdue' | 'lease_lapsed' | 'worker_lost',
  ): Promise<number> {
    const now = this.now();
    let ended = 0;
    for (const r of rows) {
      const { path, statusMessage } = end(r);
      if (await this.runs.transition(tx, r.id, r.state, path, now, { statusMessage })) ended++;
      await this.queue.release(tx, r.id);
    }
    if (ended) tx.afterCommit(() => this.metrics?.runsReaped.inc({ reason }, ended));
    return rows.length;
  }

  /**
   * QUEUED runs for a self-hosted host that no connected worker serves, or of a harness no connected
   * worker has, say so; long-gone workers are forgotten.
   *
   * The harness notes read every queued run only when the live workers' offer changed (one came,
   * went, or changed its harnesses: notes to write or to clear anywhere), and at least every
   * NOTES_WHOLE_PASS_MS (a run queued again, a team's default harness changed); otherwise only the
   * runs created since the last pass, NOTES_OVERLAP_MS before it included (a run's transaction may
   * commit after a pass that started later than the run's creation).
   */
  async markUnservedHosts(): Promise<void> {
    const now = this.now();
    const since = liveSince(now, this.policy);
    await this.queue.noteUnservedHosts(since);
    const offer = await this.registry.liveOffer(since);
    const whole = offer !== this.notes.offer || now.getTime() - this.notes.wholeAt >= NOTES_WHOLE_PASS_MS;
    await this.queue.noteMissingHarnesses(since, whole ? undefined : this.notes.createdFrom);
    this.notes = {
      offer,
      wholeAt: whole ? now.getTime() : this.notes.wholeAt,
      createdFrom: new Date(now.getTime() - NOTES_OVERLAP_MS),
    };
    await this.registry.forget(forgottenBefore(now, this.policy));
  }
}
