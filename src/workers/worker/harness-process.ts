import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { fromRoot } from '../../common/paths.js';
import type { HarnessHandle, OutputStream, RunBackend } from '../backends/backend.js';
import { containerName, removeContainer, sweepContainers } from '../backends/docker.js';
import type {
  HarnessExit,
  HarnessSpec,
  LauncherReport,
  LauncherRequest,
  SetupExit,
} from '../launcher/launcher.js';
import type { HarnessSandbox } from '../launcher/sandbox.js';

/** A line of the harness's stdout or stderr, or of a setup command's output. */
const STREAMS = { 1: 'stdout', 2: 'stderr', 3: 'setup' } as const;

interface Job {
  pid?: number;
  /** The Docker backend: its container, which outlives a killed `docker run`. */
  container?: { cli: string; name: string };
  onLine(stream: OutputStream, line: string): void;
  /** After a report's lines: resolves when more output may come (undefined: at once). */
  caughtUp?(): Promise<void> | undefined;
  /** A setup command succeeded. */
  onSetup?(exit: SetupExit): void;
  done(exit: HarnessExit): void;
}

/** The launcher's built file: in its room beside this one in dist/; when running from the sources, the build's. */
function launcherPath(): string {
  const built = fileURLToPath(new URL('../launcher/launcher.js', import.meta.url));
  return existsSync(built) ? built : fromRoot('dist', 'workers', 'launcher', 'launcher.js');
}

/**
 * The worker's side of one harness launcher (launcher.ts), started on its first spawn. Should it
 * die, the worker kills the groups it had started itself (their ids are known here) and the launcher
 * starts afresh with its next spawn.
 */
class Launcher {
  private child?: ChildProcess;
  private nextId = 1;
  private readonly jobs = new Map<number, Job>();

  /** Harnesses it runs now. */
  get live(): number {
    return this.jobs.size;
  }

  start(request: HarnessSpec, job: Job): number {
    const id = this.nextId++;
    if (request.sandbox.mode === 'docker')
      job.container = { cli: request.sandbox.docker, name: containerName(request.cwd) };
    this.jobs.set(id, job);
    this.send({ t: 'spawn', id, ...request });
    return id;
  }

  send(request: LauncherRequest): void {
    const child = this.child ?? this.fork();
    if (this.jobs.size) child.channel?.ref();
    child.send(request);
  }

  private fork(): ChildProcess {
    const child = fork(launcherPath(), [], {
      // Its own process group: a Ctrl-C to the worker's group leaves the harnesses' stop to the worker.
      detached: true,
      execArgv: [],
      // None of the service's configuration or credentials: a harness that could read this
      // process's environment (/proc/<pid>/environ) finds nothing.
      // DOCKER_HOST: the Engine the Docker backend was checked against at the start.
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.on('message', (report: LauncherReport) => this.receive(report));
    child.on('error', () => undefined);
    child.once('exit', () => this.lost(child));
    // It must not keep the worker alive: the channel holds the event loop only while harnesses run.
    child.unref();
    child.channel?.unref();
    this.child = child;
    return child;
  }

  private receive(report: LauncherReport): void {
    const job = this.jobs.get(report.id);
    if (!job) return;
    if (report.t === 'spawned') {
      job.pid = report.pid;
      return;
    }
    for (const [s, line] of report.lines) job.onLine(STREAMS[s], line);
    if (report.t === 'setup') job.onSetup?.(report.exit);
    if (report.t === 'output') {
      // The launcher reads no more of this harness's output than one report ahead of this ack.
      const ack = () => this.jobs.get(report.id) === job && this.child?.send({ t: 'ack', id: report.id });
      const waiting = job.caughtUp?.();
      if (waiting) void waiting.then(ack);
      else ack();
    }
    if (report.t === 'done') {
      this.jobs.delete(report.id);
      if (!this.jobs.size) this.child?.channel?.unref();
      job.done({ code: report.code, signal: report.signal, setupFailed: report.setupFailed });
    }
  }

  /** The launcher died (killed, out of memory): its harnesses must not outlive it unnoticed. */
  private lost(child: ChildProcess): void {
    if (this.child !== child) return;
    this.child = undefined;
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const job of jobs) {
      if (job.pid)
        try {
          process.kill(-job.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      if (job.container) void removeContainer(job.container.cli, job.container.name);
      job.onLine('stderr', 'factoryd: the harness launcher died; the harness was killed');
      job.done({ code: null, signal: 'SIGKILL' });
    }
  }
}

/**
 * A worker's launchers: one while a harness at a time runs; when every launcher has a live harness, a
 * new one, up to one per core (at most 4). A fork blocks its launcher for about a millisecond, so
 * one launcher made concurrent starts wait in line (on 2 cores, two launchers took bench/runs-exec
 * from 0.58–0.60 to 0.66–0.81 of its baseline; four did worse than two). Each is a Node process of
 * about 45 MB.
 */
const launchers: Launcher[] = [];
const MAX_LAUNCHERS = Math.max(1, Math.min(availableParallelism(), 4));

function launcherFor(): Launcher {
  const idle = launchers.find((l) => l.live === 0);
  if (idle) return idle;
  if (launchers.length < MAX_LAUNCHERS) {
    launchers.push(new Launcher());
    return launchers.at(-1)!;
  }
  return launchers.reduce((a, b) => (b.live < a.live ? b : a));
}

/**
 * One harness process in its own process group (so a stop reaches every process it started, and the
 * launcher can end the group if the worker dies), its stdout and stderr split into lines.
 */
export class HarnessProcess implements HarnessHandle {
  /** The leader exited, no process of its group is left, and its output was read (within the grace period). */
  readonly finished: Promise<HarnessExit>;
  private readonly id: number;
  private readonly launcher = launcherFor();

  /**
   * Starts `command` in the workspace `cwd`, which the launcher makes afresh with `files` (and removes
   * once the harness is done: the worker's event loop does no file system work per run).
   */
  constructor(
    spec: HarnessSpec,
    onLine: (stream: OutputStream, line: string) => void,
    caughtUp?: () => Promise<void> | undefined,
    onSetup?: (exit: SetupExit) => void,
  ) {
    let done!: (exit: HarnessExit) => void;
    this.finished = new Promise((resolve) => (done = resolve));
    this.id = this.launcher.start(spec, { onLine, caughtUp, onSetup, done });
  }

  write(line: string): void {
    this.launcher.send({ t: 'write', id: this.id, data: line });
  }

  /** SIGTERM to the group (stdin closed), SIGKILL after the grace period; resolves when the group is gone. */
  async stop(): Promise<HarnessExit> {
    this.launcher.send({ t: 'stop', id: this.id });
    return this.finished;
  }
}

/** Harnesses on this machine, from the worker's launchers, in the host's sandbox or in containers. */
export function localBackend(sandbox: HarnessSandbox): RunBackend {
  return {
    start: (spec, onLine, caughtUp, onSetup) => new HarnessProcess(spec, onLine, caughtUp, onSetup),
    sweep: async () => {
      if (sandbox.mode === 'docker') await sweepContainers(sandbox.docker);
    },
  };
}
