import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * How a harness is started: `/bin/sh -c SUPERVISOR factoryd-harness COMMAND`, in its own process
 * group. Node has no PDEATHSIG, so a worker that dies abruptly (SIGKILL, OOM) could leave the
 * harness's process tree running. The supervisor forks a watcher that blocks reading fd 3, a pipe
 * whose other end only the worker holds: when the worker dies the kernel closes it, the read ends
 * and the watcher kills the whole group. The harness itself runs without fd 3, via `eval` in the
 * supervisor shell (the same `sh -c` semantics as before, and no extra exec); when it ends the
 * watcher is stopped and reaped, so the group is empty once the supervisor has exited.
 */
const SUPERVISOR = [
  '(read _ <&3; kill -KILL 0) </dev/null >/dev/null 2>&1 &',
  'factoryd_watcher=$!',
  'exec 3<&-',
  'factoryd_command=$1; shift',
  'eval "$factoryd_command"',
  'factoryd_status=$?',
  'kill $factoryd_watcher 2>/dev/null; wait $factoryd_watcher 2>/dev/null',
  'exit $factoryd_status',
].join('\n');

/**
 * One harness process in its own process group (so cancel reaches every process it started, and a
 * dying worker takes the group with it), its stdout and stderr split into lines.
 */
export class HarnessProcess {
  private readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /** stdout and stderr have ended (every line was read). */
  private readonly closed: Promise<void>;
  private killTimer?: NodeJS.Timeout;

  constructor(
    command: string,
    cwd: string,
    env: Record<string, string>,
    onLine: (stream: 'stdout' | 'stderr', line: string) => void,
  ) {
    this.child = spawn('/bin/sh', ['-c', SUPERVISOR, 'factoryd-harness', command], {
      cwd,
      env: { ...process.env, ...env },
      detached: true,
      // fd 3: the lifeline the supervisor's watcher reads (nothing is ever written to it).
      stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.child.stdin!.on('error', () => undefined); // a harness may exit without reading its input
    createInterface({ input: this.child.stdout! }).on('line', (l) => onLine('stdout', l));
    createInterface({ input: this.child.stderr! }).on('line', (l) => onLine('stderr', l));
    this.closed = new Promise((resolve) => this.child.once('close', () => resolve()));
    this.exited = new Promise((resolve) => {
      this.child.once('error', () => resolve({ code: 127, signal: null }));
      this.child.once('exit', (code, signal) => resolve({ code, signal }));
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  write(line: string): void {
    if (this.child.stdin?.writable) this.child.stdin.write(line);
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves when no process of the group is left. */
  async terminate(graceMs: number): Promise<void> {
    this.signalGroup('SIGTERM');
    this.killTimer ??= setTimeout(() => this.signalGroup('SIGKILL'), graceMs);
    await this.exited;
    await this.reapGroup(graceMs);
  }

  /** Waits (at most `ms`) until the last output line was read. */
  async drained(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.closed, new Promise((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  /** After the leader exited, anything it left behind in its group is killed too. */
  async reapGroup(graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    while (this.groupAlive()) {
      this.signalGroup(Date.now() < deadline ? 'SIGTERM' : 'SIGKILL');
      await new Promise((r) => setTimeout(r, 20));
    }
    clearTimeout(this.killTimer);
    this.child.stdin?.destroy();
    this.child.stdio[3]?.destroy();
  }

  private groupAlive(): boolean {
    if (!this.child.pid) return false;
    try {
      process.kill(-this.child.pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  private signalGroup(signal: NodeJS.Signals): void {
    if (!this.child.pid) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      /* the group is gone */
    }
  }
}
