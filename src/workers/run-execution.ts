import { rmSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import {
  RepositoryFailed,
  type RepositoryCache,
  type StagedRepository,
} from '../environments/repository-cache.js';
import type { ResolvedEnvironment } from '../environments/resolved-environment.js';
import type { Assignment, Outcome, WorkerBackend } from './assignment.js';
import { encodeInput, parseHarnessLine, type HarnessEvent } from './harness-protocol.js';
import { HarnessProcess, type OutputStream } from './harness-process.js';
import type { SetupExit, WorkspaceFile } from './launcher.js';
import { harnessEnvironment, type HarnessSandbox } from './sandbox.js';

export interface ExecutionOptions {
  harnessCommand: string;
  killGraceMs: number;
  /** Workspaces are made under this folder, one per execution, removed afterwards. */
  workspaceRoot: string;
  /** How long one minute of `idle_timeout_minutes` and of the run's duration limit lasts (Config.idleMinuteMs). */
  idleMinuteMs: number;
  /** How harnesses are confined (sandbox.ts). */
  sandbox: HarnessSandbox;
  /** HARNESS_ENV_ALLOW: the service's variables a harness also gets. */
  envAllow: readonly string[];
  /**
   * This worker's own limits (RUN_IDLE_TIMEOUT_MINUTES, RUN_MAX_DURATION_MINUTES; 0: none), for an
   * assignment that carries none (from a service older than the limits).
   */
  idleTimeoutMinutes: number;
  maxDurationMinutes: number;
  /** This worker's repository cache (environments' repositories); absent: a run with repositories fails. */
  repositories?: RepositoryCache;
}

const LAST_LINES = 20;
/** Events are sent in batches at most this old; the start goes with the first batch or alone after this. */
const FLUSH_EVERY_MS = 50;

/** One execution of one run: workspace, harness process, events out, follow-ups and cancel in. */
export class RunExecution {
  private harness?: HarnessProcess;
  private readonly lastLines: string[] = [];
  private pending: HarnessEvent[] = [];
  private reports: Promise<void> = Promise.resolve();
  private flushTimer?: NodeJS.Timeout;
  private idleTimer?: NodeJS.Timeout;
  private durationTimer?: NodeJS.Timeout;
  private result?: Extract<HarnessEvent, { type: 'result' }>;
  private stoppedBy?: Outcome['stoppedBy'];
  private readonly workspace: string;
  private spawnedAt = 0;
  private startReported = false;

  constructor(
    readonly assignment: Assignment,
    private readonly backend: WorkerBackend,
    private readonly opts: ExecutionOptions,
  ) {
    this.workspace = join(opts.workspaceRoot, `${assignment.run_id}-${assignment.execution}`);
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
    try {
      if (a.environment_problem) return this.environmentFailed(a.environment_problem);
      let repositories: StagedRepository[] = [];
      try {
        repositories = await this.cloneRepositories(staging);
      } catch (err) {
        if (err instanceof RepositoryFailed) return this.environmentFailed(err.message);
        throw err;
      }
      if (this.stoppedBy) throw new Error(`stopped (${this.stoppedBy}) before the harness started`);
      this.harness = new HarnessProcess(
        {
          command: a.harness_command ?? this.opts.harnessCommand,
          cwd: this.workspace,
          files: this.workspaceFiles(),
          env: harnessEnvironment(
            { ...environmentVariables(a.environment, a.environment_secrets), ...this.env() },
            this.workspace,
            this.opts.envAllow,
          ),
          repositories: repositories.map((r) => ({ from: r.from, path: r.path })),
          setup: a.environment?.setup_commands,
          sandbox: this.opts.sandbox,
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
        (exit) => this.onSetup(exit),
      );
      this.spawnedAt = performance.now();
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
      const events = this.takePending();
      const start = this.takeStart();
      const commits = repositories.length ? repositories.map((r) => r.commit) : undefined;
      this.report(() =>
        this.backend.finish(a.run_id, a.execution, {
          stoppedBy: this.stoppedBy,
          exitCode: exit.code,
          signal: exit.signal,
          lastLines: this.lastLines,
          result: this.result,
          events,
          startedMsAgo: start?.(),
          ...(exit.setupFailed ? { environmentFailure: this.setupFailure(exit.setupFailed) } : {}),
          ...(commits ? { commits } : {}),
        }),
      );
    } catch (err) {
      this.report(() =>
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
      a.team_id,
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

  /** The environment could not be prepared: the run ends FAILED (environment_setup_failed), nothing started. */
  private environmentFailed(message: string): Promise<void> {
    const a = this.assignment;
    const events = this.takePending();
    return this.report(() =>
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
          ? { type: 'transcript', stream: 'stdout', text: `[setup] ${line}` }
          : { type: 'transcript', stream: 'stderr', text: line };
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
    this.pending.push(event);
    // A status change (BLOCKED) is reported at once; other events are batched briefly (a result is
    // usually followed by the exit, and goes with the end).
    if (event.type === 'status') void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS);
  }

  private workspaceRelative(path: string): string {
    if (!isAbsolute(path)) return path.replace(/^\.\//, '');
    const rel = relative(this.workspace, path);
    return rel.startsWith('..') ? path : rel;
  }

  /** Queues a report behind the earlier ones (reports keep their order; a failed one is skipped). */
  private report(send: () => Promise<void>): Promise<void> {
    this.reports = this.reports.then(send).catch(() => undefined);
    return this.reports;
  }

  /** Sends pending events, and the start if it was not reported yet. */
  private flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const batch = this.takePending();
    const start = this.takeStart();
    if (!batch.length && !start) return this.reports;
    return this.report(() => this.backend.record(this.runId, this.assignment.execution, batch, start?.()));
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
