import { rmSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import {
  RepositoryFailed,
  type RepositoryCache,
  type StagedRepository,
} from '../../environments/repository-cache.js';
import { repositoryEgressRules } from '../../common/egress-policy.js';
import { baseUrlRule } from '../../harnesses/base-url.js';
import type { ResolvedEnvironment } from '../../environments/resolved-environment.js';
import { HARNESSES, type BuiltInHarness } from '../../harnesses/harness-types.js';
import type { Assignment, Outcome, TranscriptBudget, WorkerBackend } from '../protocol/assignment.js';
import {
  encodeInput,
  eventBytes,
  harnessText,
  parseHarnessLine,
  type HarnessEvent,
} from '../protocol/harness-protocol.js';
import type { HarnessHandle, OutputStream, RunBackend } from '../backends/backend.js';
import { containerNetwork } from '../backends/docker.js';
import { localBackend } from './harness-process.js';
import { packageProgramCommand } from '../launcher/harness-programs.js';
import type { SetupExit, WorkspaceFile } from '../launcher/launcher.js';
import { egressEnvironment, forwarderCommand, type EgressChannel, type EgressProxy } from './egress-proxy.js';
import { harnessEnvironment, type HarnessSandbox } from '../launcher/sandbox.js';

export interface ExecutionOptions {
  harnessCommand: string;
  killGraceMs: number;
  /** Workspaces are made under this folder, one per execution, removed afterwards. */
  workspaceRoot: string;
  /** How long one minute of `idle_timeout_minutes` and of the run's duration limit lasts (Config.idleMinuteMs). */
  idleMinuteMs: number;
  /** How harnesses are confined (sandbox.ts). */
  sandbox: HarnessSandbox;
  /** Where harnesses run; default: this machine, in `sandbox` (localBackend). */
  backend?: RunBackend;
  /** HARNESS_ENV_ALLOW: the service's variables a harness also gets. */
  envAllow: readonly string[];
  /**
   * The way out of a sandbox's network namespace (bwrap, user); none there: no network at all.
   * Unused in `none` mode, where a harness has the machine's network.
   */
  egress?: EgressProxy;
  /**
   * This worker's own limits (RUN_IDLE_TIMEOUT_MINUTES, RUN_MAX_DURATION_MINUTES; 0: none), for an
   * assignment that carries none (from a service older than the limits).
   */
  idleTimeoutMinutes: number;
  maxDurationMinutes: number;
  /** The agent CLIs this worker has (installed-clis.ts): a built-in harness runs only where its CLI is. */
  clis: Partial<Record<BuiltInHarness, string>>;
  /**
   * A team's own self-hosted worker (`factoryd worker --worker-host`): only there does a run's
   * `worker_environment` take the provider key from this process's environment. A service-hosted
   * worker's environment is the operator's, shared by every team.
   */
  selfHosted: boolean;
  /** This worker's own transcript budget, for an assignment that carries none (as the limits above). */
  transcriptBudget: TranscriptBudget;
  /** A report (events, end) the service did not take: logged by the caller (never its content). */
  onReportFailed?: (runId: string, report: 'events' | 'end', err: unknown) => void;
  /** This worker's repository cache (environments' repositories); absent: a run with repositories fails. */
  repositories?: RepositoryCache;
  /** Each harness start, by harness type (`oz`: a command) and outcome: for the service's metrics. */
  onHarnessStart?: (harness: string, outcome: HarnessStartOutcome) => void;
}

/**
 * How a harness start went: the agent's harness `started` (after the environment's setup commands, if
 * any), the environment could not be prepared (`environment_failed`: a clone, a secret it names, a
 * setup command that failed), it could not start (`failed`: no such CLI, its key missing, the sandbox
 * refused), or the run was stopped first.
 */
export type HarnessStartOutcome = 'started' | 'environment_failed' | 'failed' | 'stopped';

const LAST_LINES = 20;
/** Events are sent in batches at most this old; the start goes with the first batch or alone after this. */
const FLUSH_EVERY_MS = 50;
/**
 * Output not yet sent (queued or in a report on its way) past which the harness's output waits: the
 * launcher reads no more of its pipes until the reports caught up, so the harness blocks on write
 * and the worker's memory stays bounded whatever it prints.
 */
const MAX_UNSENT_BYTES = 1024 * 1024;
/** A report's events at most: the worker API's limit (schemas/api/worker-events-request.schema.json). */
const REPORT_MAX_EVENTS = 1000;
/** A batch this large goes at once: far under a report's body limit (16 MiB), even with an artifact more. */
const REPORT_MAX_BYTES = 4 * 1024 * 1024;

/** One execution of one run: workspace, harness process, events out, follow-ups and cancel in. */
export class RunExecution {
  private harness?: HarnessHandle;
  private readonly lastLines: string[] = [];
  private pending: HarnessEvent[] = [];
  private reports: Promise<void> = Promise.resolve();
  private flushTimer?: NodeJS.Timeout;
  private idleTimer?: NodeJS.Timeout;
  private durationTimer?: NodeJS.Timeout;
  private result?: Extract<HarnessEvent, { type: 'result' }>;
  private stoppedBy?: Outcome['stoppedBy'];
  private startOutcome?: HarnessStartOutcome;
  private readonly workspace: string;
  private spawnedAt = 0;
  private startReported = false;
  /** Output kept for the service so far (eventBytes, events) against the run's transcript budget. */
  private readonly budget: TranscriptBudget;
  private keptBytes = 0;
  private keptEvents = 0;
  /** Bytes of the events in `pending`, and of those in reports not yet answered. */
  private pendingBytes = 0;
  private unsentBytes = 0;

  constructor(
    readonly assignment: Assignment,
    private readonly backend: WorkerBackend,
    private readonly opts: ExecutionOptions,
  ) {
    this.workspace = join(opts.workspaceRoot, `${assignment.run_id}-${assignment.execution}`);
    this.budget = assignment.transcript_budget ?? opts.transcriptBudget;
  }

  get runId(): string {
    return this.assignment.run_id;
  }

  /**
   * Runs the harness; resolves when its process tree is gone (the slot is free again). Reports to
   * the service (start, events, end) go out in order behind it, without holding the slot: `reported`.
   */
  async run(): Promise<void> {
    const a = this.assignment;
    const staging =
      this.opts.repositories && join(this.opts.repositories.root, 'staging', `${a.run_id}-${a.execution}`);
    let channel: EgressChannel | undefined;
    try {
      if (a.environment_problem) return this.environmentFailed(a.environment_problem);
      let repositories: StagedRepository[] = [];
      try {
        repositories = await this.cloneRepositories(staging);
      } catch (err) {
        if (err instanceof RepositoryFailed) return this.environmentFailed(err.message);
        throw err;
      }
      const { sandbox } = this.opts;
      // No way out to give where the harness has the machine's network, or Docker's bridge.
      const unconfined =
        sandbox.mode === 'none' ||
        (sandbox.mode === 'docker' &&
          containerNetwork(sandbox, { network: a.environment?.network }) === 'bridge');
      const egress = unconfined ? undefined : this.opts.egress;
      channel = await egress?.open({
        team: a.team_id,
        run: a.run_id,
        allow: [
          ...repositoryEgressRules((a.environment?.repositories ?? []).map((r) => r.url)),
          // The team's own base URL: a rule, not a trust (its addresses must be public).
          ...(a.harness?.base_url ? [baseUrlRule(a.harness.base_url)] : []),
        ],
      });
      if (this.stoppedBy) throw new Error(`stopped (${this.stoppedBy}) before the harness started`);
      this.harness = (this.opts.backend ?? localBackend(this.opts.sandbox)).start(
        {
          command: this.command(),
          cwd: this.workspace,
          files: this.workspaceFiles(),
          env: {
            ...harnessEnvironment(
              {
                ...environmentVariables(a.environment, a.environment_secrets),
                ...this.env(),
                ...this.harnessEnv(),
              },
              this.workspace,
              this.opts.envAllow,
            ),
            ...(channel ? egressEnvironment() : {}),
          },
          repositories: repositories.map((r) => ({ from: r.from, path: r.path })),
          setup: a.environment?.setup_commands,
          sandbox: this.opts.sandbox,
          placement: { image: a.environment?.docker_image, network: a.environment?.network },
          ...(channel && { egress: { socket: channel.socket, forwarder: forwarderCommand(egress!.policy) } }),
          graceMs: this.opts.killGraceMs,
          stdin: encodeInput({
            type: 'prompt',
            run_id: a.run_id,
            prompt: a.prompt,
            base_prompt: a.base_prompt,
            followups: a.followups,
            attachments: a.attachments.map((f) => f.file_name),
            ...(a.history.length ? { history: a.history } : {}),
          }),
        },
        (s, l) => this.onLine(s, l),
        () => this.caughtUp(),
        (exit) => this.onSetup(exit),
      );
      this.spawnedAt = performance.now();
      if (!a.environment?.setup_commands.length) this.started('started');
      const maxMinutes = a.max_duration_minutes ?? this.opts.maxDurationMinutes;
      if (maxMinutes)
        this.durationTimer = setTimeout(
          () => void this.stop('max_duration'),
          maxMinutes * this.opts.idleMinuteMs,
        );
      // The start is not a report of its own: it goes with the first events, or alone once
      // FLUSH_EVERY_MS passed, or, for a run that ends sooner, with its end (one statement).
      this.flushTimer = setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
      this.touch();
      const exit = await this.harness.finished;
      this.clearTimers();
      if (exit.setupFailed) this.onSetup(exit.setupFailed);
      this.started(exit.setupFailed ? 'environment_failed' : 'stopped'); // unless it was counted already
      const events = this.takePending();
      const start = this.takeStart();
      const commits = repositories.length ? repositories.map((r) => r.commit) : undefined;
      // Should the end with its last events fail, it is said and sent again without them: a run is
      // not lost (its lease left to lapse) for what its harness printed last.
      this.report('end', 0, async () => {
        const outcome: Outcome = {
          stoppedBy: this.stoppedBy,
          exitCode: exit.code,
          signal: exit.signal,
          lastLines: this.lastLines,
          result: this.result,
          events,
          startedMsAgo: start?.(),
          ...(exit.setupFailed ? { environmentFailure: this.setupFailure(exit.setupFailed) } : {}),
          ...(commits ? { commits } : {}),
        };
        await this.backend.finish(a.run_id, a.execution, outcome).catch((err: unknown) => {
          if (!events.length) throw err;
          this.opts.onReportFailed?.(this.runId, 'end', err);
          return this.backend.finish(a.run_id, a.execution, { ...outcome, events: [] });
        });
      });
    } catch (err) {
      this.started(this.stoppedBy ? 'stopped' : 'failed');
      this.report('end', 0, () =>
        this.backend.finish(a.run_id, a.execution, {
          stoppedBy: this.stoppedBy,
          exitCode: 127,
          signal: null,
          lastLines: [
            `factoryd could not start the harness: ${err instanceof Error ? err.message : String(err)}`,
          ],
        }),
      );
    } finally {
      this.clearTimers();
      // What the launcher did not move into the workspace (a run that failed or stopped first).
      if (staging) rmSync(staging, { recursive: true, force: true });
      await channel?.close();
    }
  }

  /** The environment's repositories, fetched into the worker's cache and cloned into `staging`. */
  private async cloneRepositories(staging: string | undefined): Promise<StagedRepository[]> {
    const a = this.assignment;
    const wanted = a.environment?.repositories ?? [];
    if (!wanted.length) return [];
    if (!this.opts.repositories || !staging)
      throw new RepositoryFailed(
        "This worker has no repository cache: it cannot clone the environment's repositories",
      );
    const staged = await this.opts.repositories.stage(
      // A service older than team_name: no root bound to a team is the run's (only shared ones are).
      { id: a.team_id, name: a.team_name ?? '' },
      wanted,
      a.environment_secrets ?? {},
      staging,
    );
    staged.forEach((r, i) =>
      this.pending.push({
        type: 'action',
        kind: 'environment_repository',
        input: { url: wanted[i]!.url, path: r.path, commit: r.commit },
      }),
    );
    return staged;
  }

  /** Counts the start's outcome once: the first one said is what happened. */
  private started(outcome: HarnessStartOutcome): void {
    if (this.startOutcome) return;
    this.startOutcome = outcome;
    this.opts.onHarnessStart?.(this.assignment.harness?.type ?? 'oz', outcome);
  }

  /** The environment could not be prepared: the run ends FAILED (environment_setup_failed), nothing started. */
  private environmentFailed(message: string): Promise<void> {
    this.started('environment_failed');
    const a = this.assignment;
    const events = this.takePending();
    return this.report('end', 0, () =>
      this.backend.finish(a.run_id, a.execution, {
        stoppedBy: this.stoppedBy,
        exitCode: null,
        signal: null,
        lastLines: [],
        events,
        environmentFailure: message,
      }),
    );
  }

  private setupFailure(exit: SetupExit): string {
    const total = this.assignment.environment?.setup_commands.length ?? exit.index + 1;
    const how = exit.code === null ? `was killed by ${exit.signal}` : `exited with status ${exit.code}`;
    const tail = this.lastLines.slice(-5).join('\n');
    return `Setup command ${exit.index + 1} of ${total} ${how}; the agent did not start: ${exit.command}${tail ? `\n${tail}` : ''}`;
  }

  /** A setup command ended: it goes to the conversation as an action, with its exit status. */
  private onSetup(exit: SetupExit): void {
    // The last setup command succeeded: the harness starts now.
    const last = (this.assignment.environment?.setup_commands.length ?? 0) - 1;
    if (exit.index === last && exit.code === 0) this.started('started');
    this.pending.push({
      type: 'action',
      kind: 'environment_setup',
      input: { index: exit.index, command: exit.command, exit_code: exit.code, signal: exit.signal },
    });
    this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
  }

  private clearTimers(): void {
    clearTimeout(this.idleTimer);
    clearTimeout(this.durationTimer);
    clearTimeout(this.flushTimer);
  }

  /** Resolves when every report of this execution has been sent. */
  get reported(): Promise<void> {
    return this.reports;
  }

  followup(message: string): void {
    this.harness?.write(encodeInput({ type: 'followup', message }));
    this.touch();
  }

  /** `interrupt` on stdin: the harness stops its current turn, reports BLOCKED and waits for a follow-up. */
  interrupt(): void {
    this.harness?.write(encodeInput({ type: 'interrupt' }));
    this.touch();
  }

  /** `cancel` on stdin, then SIGTERM to the process group, SIGKILL after the grace period. */
  async stop(reason: NonNullable<Outcome['stoppedBy']>): Promise<void> {
    if (this.stoppedBy) return;
    this.stoppedBy = reason; // before the harness started: it never will
    if (!this.harness) return;
    this.harness.write(encodeInput({ type: 'cancel' }));
    await this.harness.stop();
  }

  /** The workspace's files: the run's attachments, and the team's skills under `factory-skills/`. */
  private workspaceFiles(): WorkspaceFile[] {
    const a = this.assignment;
    return [
      ...a.attachments.map((f) => ({
        path: this.inside(f.file_name),
        data: f.data,
        encoding: 'base64' as const,
      })),
      ...a.skills.map((sk) => ({
        path: this.inside(join('factory-skills', sk.factory, sk.path)),
        data: sk.content,
        encoding: 'utf8' as const,
      })),
    ];
  }

  /** A path in the workspace, relative to it; names that would escape it are refused. */
  private inside(name: string): string {
    const path = resolve(this.workspace, name);
    if (!path.startsWith(this.workspace + sep))
      throw new Error(`attachment name escapes the workspace: ${name}`);
    return relative(this.workspace, path);
  }

  /**
   * The harness command line: a built-in harness's adapter (dist/harnesses/<type>.harness.js, run by
   * this worker's own Node, from where the harness's uid reaches it: harness-programs.ts), else the team's command, else HARNESS_COMMAND. A built-in harness that
   * cannot run (its secret missing) throws: the run ends at once with the reason.
   */
  private command(): string {
    const h = this.assignment.harness;
    if (!h) return this.assignment.harness_command ?? this.opts.harnessCommand;
    if (h.error) throw new Error(h.error);
    // The service refuses this already (worker-runs.service.ts); said again here, where the key is.
    if (h.worker_environment && !this.opts.selfHosted)
      throw new Error(
        `the agent's auth.workerEnvironment is honoured only on the team's own self-hosted worker; this worker is service-hosted`,
      );
    if (!this.opts.clis[h.type])
      throw new Error(
        `this worker has no ${HARNESSES[h.type].title} CLI (factoryd harnesses install ${h.type})`,
      );
    return packageProgramCommand('dist/harnesses', `${h.type}.harness.js`);
  }

  /**
   * A built-in harness's variables: its CLI, the provider key (from the assignment, or this worker's
   * own environment with `worker_environment`) and the base URL for that provider only: the team's
   * own (teams set-base-url), else the operator's.
   */
  private harnessEnv(): Record<string, string> {
    const h = this.assignment.harness;
    if (!h) return {};
    const info = HARNESSES[h.type];
    const own = (name: string) => (process.env[name] ? { [name]: process.env[name] } : {});
    return {
      FACTORYD_HARNESS_TYPE: h.type,
      FACTORYD_HARNESS_CLI: this.opts.clis[h.type] ?? '',
      // The adapter stops its CLI within this (adapter-runner.ts): before the launcher's SIGKILL.
      FACTORYD_KILL_GRACE_MS: String(this.opts.killGraceMs),
      ...(h.secret_name ? { FACTORYD_HARNESS_SECRET: h.secret_name } : {}),
      ...own(info.baseUrlVariable),
      ...(h.worker_environment && this.opts.selfHosted ? own(info.keyVariable) : {}),
      ...h.env,
      ...(h.base_url ? { [info.baseUrlVariable]: h.base_url } : {}),
    };
  }

  private env(): Record<string, string> {
    const a = this.assignment;
    return {
      FACTORYD_RUN_ID: a.run_id,
      FACTORYD_SESSION_ID: a.session_id,
      FACTORYD_EXECUTION: String(a.execution),
      FACTORYD_WORKSPACE: this.workspace,
      FACTORYD_AGENT_CONFIG: JSON.stringify(a.agent_config),
      FACTORYD_MODEL_ID: typeof a.agent_config.model_id === 'string' ? a.agent_config.model_id : '',
    };
  }

  private onLine(stream: OutputStream, line: string): void {
    this.touch();
    let event: HarnessEvent =
      stream === 'stdout'
        ? parseHarnessLine(line)
        : stream === 'setup'
          ? { type: 'transcript', stream: 'stdout', text: `[setup] ${harnessText(line)}` }
          : { type: 'transcript', stream: 'stderr', text: harnessText(line) };
    if (event.type === 'transcript') {
      this.lastLines.push(event.text);
      if (this.lastLines.length > LAST_LINES) this.lastLines.shift();
    }
    if (event.type === 'result') this.result = event;
    if (event.type === 'action' && typeof event.input.skill_path === 'string') {
      event = {
        ...event,
        input: { ...event.input, skill_path: this.workspaceRelative(event.input.skill_path) },
      };
    }
    if (!this.withinBudget(event)) return;
    this.pending.push(event);
    // A status change (BLOCKED) is reported at once, and so is a full batch (a report holds at most
    // REPORT_MAX_EVENTS, and stays well under its body limit); other events are batched briefly (a
    // result is usually followed by the exit, and goes with the end).
    if (
      event.type === 'status' ||
      this.pending.length >= REPORT_MAX_EVENTS ||
      this.pendingBytes >= REPORT_MAX_BYTES
    )
      void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
  }

  /**
   * Whether the event goes to the service: while the run's output is within its transcript budget,
   * up to the first event that does not fit (the service notes the truncation when it drops one);
   * after that only a BLOCKED status, which changes the run's state. The service counts for itself.
   */
  private withinBudget(event: HarnessEvent): boolean {
    const over = this.keptBytes > this.budget.bytes || this.keptEvents > this.budget.events;
    if (over && event.type !== 'status') return false;
    const bytes = eventBytes(event);
    this.keptBytes += bytes;
    this.keptEvents += 1;
    this.pendingBytes += bytes;
    return true;
  }

  /**
   * Resolves when the launcher may read more of the harness's output: at once, or once the reports
   * under way were answered when MAX_UNSENT_BYTES of output wait (back-pressure on the harness).
   */
  private caughtUp(): Promise<void> | undefined {
    return this.pendingBytes + this.unsentBytes > MAX_UNSENT_BYTES ? this.flush() : undefined;
  }

  private workspaceRelative(path: string): string {
    if (!isAbsolute(path)) return path.replace(/^\.\//, '');
    const rel = relative(this.workspace, path);
    return rel.startsWith('..') ? path : rel;
  }

  /**
   * Queues a report behind the earlier ones (reports keep their order). A failed one is skipped, and
   * said (onReportFailed): the run goes on, and its end is still reported.
   */
  private report(what: 'events' | 'end', bytes: number, send: () => Promise<void>): Promise<void> {
    this.reports = this.reports
      .then(send)
      .catch((err: unknown) => this.opts.onReportFailed?.(this.runId, what, err))
      .finally(() => (this.unsentBytes -= bytes));
    return this.reports;
  }

  /** Sends pending events, and the start if it was not reported yet. */
  private flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const batch = this.takePending();
    const start = this.takeStart();
    if (!batch.length && !start) return this.reports;
    const bytes = this.pendingBytes;
    this.pendingBytes = 0;
    this.unsentBytes += bytes;
    return this.report('events', bytes, () =>
      this.backend.record(this.runId, this.assignment.execution, batch, start?.()),
    );
  }

  private takePending(): HarnessEvent[] {
    const batch = this.pending;
    this.pending = [];
    return batch;
  }

  /** For the first report after the spawn only: ms since the harness started, read as the report goes out. */
  private takeStart(): (() => number) | undefined {
    if (this.startReported || !this.harness) return undefined;
    this.startReported = true;
    return () => Math.round(performance.now() - this.spawnedAt);
  }

  private touch(): void {
    const minutes = this.assignment.idle_timeout_minutes ?? this.opts.idleTimeoutMinutes;
    if (!minutes) return;
    if (this.idleTimer) this.idleTimer.refresh();
    else this.idleTimer = setTimeout(() => void this.stop('idle'), minutes * this.opts.idleMinuteMs);
  }
}

/** The environment's variables, and its secret variables with their values (for this run's processes only). */
function environmentVariables(
  environment: ResolvedEnvironment | undefined,
  secretValues: Record<string, string> = {},
): Record<string, string> {
  if (!environment) return {};
  const secrets = Object.entries(environment.secrets).flatMap(([name, secret]) =>
    secretValues[secret] !== undefined ? [[name, secretValues[secret]!]] : [],
  );
  return { ...environment.env_vars, ...Object.fromEntries(secrets) };
}
