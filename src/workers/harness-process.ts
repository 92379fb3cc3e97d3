import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fromRoot } from '../common/paths.js';
import type { LauncherReport, LauncherRequest, WorkspaceFile } from './launcher.js';

export interface HarnessExit {
  code: number | null;
  signal: string | null;
}

interface Job {
  pid?: number;
  onLine(stream: 'stdout' | 'stderr', line: string): void;
  done(exit: HarnessExit): void;
}

/** The launcher's built file: beside this module in dist/; when running from the sources, the build's. */
function launcherPath(): string {
  const beside = fileURLToPath(new URL('./launcher.js', import.meta.url));
  return existsSync(beside) ? beside : fromRoot('dist', 'workers', 'launcher.js');
}

/**
 * The worker's side of the harness launcher (launcher.ts): started on the first spawn, one per
 * worker process. Should it die, the worker kills the groups it had started itself (their ids are
 * known here) and a new launcher starts with the next spawn.
 */
class Launcher {
  private child?: ChildProcess;
  private nextId = 1;
  private readonly jobs = new Map<number, Job>();

  start(request: Omit<Extract<LauncherRequest, { t: 'spawn' }>, 't' | 'id'>, job: Job): number {
    const id = this.nextId++;
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
    if (report.t === 'spawned') job.pid = report.pid;
    else if (report.t === 'lines')
      for (const line of report.lines) job.onLine(report.s === 1 ? 'stdout' : 'stderr', line);
    else {
      this.jobs.delete(report.id);
      if (!this.jobs.size) this.child?.channel?.unref();
      job.done({ code: report.code, signal: report.signal });
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
      job.onLine('stderr', 'factoryd: the harness launcher died; the harness was killed');
      job.done({ code: null, signal: 'SIGKILL' });
    }
  }
}

const launcher = new Launcher();

/**
 * One harness process in its own process group (so a stop reaches every process it started, and the
 * launcher can end the group if the worker dies), its stdout and stderr split into lines.
 */
export class HarnessProcess {
  /** The leader exited, no process of its group is left, and its output was read (within the grace period). */
  readonly finished: Promise<HarnessExit>;
  private readonly id: number;

  /**
   * Starts `command` in the workspace `cwd`, which the launcher makes afresh with `files` (and removes
   * once the harness is done: the worker's event loop does no file system work per run).
   */
  constructor(
    spec: {
      command: string;
      cwd: string;
      files: WorkspaceFile[];
      env: Record<string, string>;
      graceMs: number;
    },
    onLine: (stream: 'stdout' | 'stderr', line: string) => void,
  ) {
    let done!: (exit: HarnessExit) => void;
    this.finished = new Promise((resolve) => (done = resolve));
    this.id = launcher.start(spec, { onLine, done });
  }

  write(line: string): void {
    launcher.send({ t: 'write', id: this.id, data: line });
  }

  /** SIGTERM to the group (stdin closed), SIGKILL after the grace period; resolves when the group is gone. */
  async stop(): Promise<HarnessExit> {
    launcher.send({ t: 'stop', id: this.id });
    return this.finished;
  }
}
