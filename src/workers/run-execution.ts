import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Assignment, Outcome, WorkerBackend } from './assignment.js';
import { encodeInput, parseHarnessLine, type HarnessEvent } from './harness-protocol.js';
import { HarnessProcess } from './harness-process.js';
import type { WorkspaceFile } from './launcher.js';
import { egressEnvironment, forwarderCommand, type EgressChannel, type EgressProxy } from './egress-proxy.js';
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
    let channel: EgressChannel | undefined;
    try {
      const egress = this.opts.sandbox.mode === 'none' ? undefined : this.opts.egress;
      channel = await egress?.open({ team: a.team_id, run: a.run_id });
      if (this.stoppedBy) throw new Error(`stopped (${this.stoppedBy}) before the harness started`);
      this.harness = new HarnessProcess(
        {
          command: a.harness_command ?? this.opts.harnessCommand,
          cwd: this.workspace,
          files: this.workspaceFiles(),
          env: {
            ...harnessEnvironment(this.env(), this.workspace, this.opts.envAllow),
            ...(channel ? egressEnvironment() : {}),
          },
          sandbox: this.opts.sandbox,
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
      const events = this.takePending();
      const start = this.takeStart();
      this.report(() =>
        this.backend.finish(a.run_id, a.execution, {
          stoppedBy: this.stoppedBy,
          exitCode: exit.code,
          signal: exit.signal,
          lastLines: this.lastLines,
          result: this.result,
          events,
          startedMsAgo: start?.(),
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
      await channel?.close();
    }
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

  private onLine(stream: 'stdout' | 'stderr', line: string): void {
    this.touch();
    let event: HarnessEvent =
      stream === 'stdout' ? parseHarnessLine(line) : { type: 'transcript', stream: 'stderr', text: line };
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
