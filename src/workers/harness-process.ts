import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/**
 * Node has no PDEATHSIG: a worker killed abruptly (SIGKILL, OOM, a crash) would leave its harnesses'
 * process trees running. So each worker process keeps a guardian — a tiny shell in its own process
 * group — told on its stdin which harness process groups are live (`+PGID`, `-PGID`). When that
 * pipe closes because the worker is gone, the guardian kills every group still listed. (One
 * process per worker, not one per harness: a wrapper per run cost a fork and a signal each.)
 */
const GUARDIAN_SCRIPT = `groups=' '
while read -r line; do
  case $line in
    +*) groups="$groups\${line#+} " ;;
    -*) g=\${line#-}; case $groups in *" $g "*) groups="\${groups%% $g *} \${groups#* $g }" ;; esac ;;
  esac
done
for g in $groups; do kill -KILL -"$g" 2>/dev/null; done`;

class Guardian {
  private child?: ChildProcess;
  private readonly groups = new Set<number>();
  /** Lines for the guardian, written once per turn of the event loop (one write for several slots). */
  private pending = '';

  add(pgid: number): void {
    this.groups.add(pgid);
    this.send(`+${pgid}\n`);
  }

  remove(pgid: number): void {
    if (this.groups.delete(pgid)) this.send(`-${pgid}\n`);
  }

  private send(line: string): void {
    if (!this.pending) setImmediate(() => this.flush());
    this.pending += line;
  }

  private flush(): void {
    const lines = this.pending;
    this.pending = '';
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) child.stdin!.write(lines);
    else this.start(); // (again, if it was killed): it is told every live group
  }

  private start(): void {
    const child = spawn('/bin/sh', ['-c', GUARDIAN_SCRIPT], {
      detached: true, // its own group: a signal to the worker's group leaves it to clean up
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    child.on('error', () => undefined);
    child.stdin!.on('error', () => undefined);
    // It must not keep the worker alive: it ends when the worker does.
    child.unref();
    (child.stdin as unknown as { unref(): void }).unref();
    this.child = child;
    if (this.groups.size) child.stdin!.write([...this.groups].map((g) => `+${g}\n`).join(''));
  }
}

const guardian = new Guardian();

/**
 * One harness process in its own process group (so cancel reaches every process it started, and the
 * guardian can end the group if the worker dies), its stdout and stderr split into lines.
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
    this.child = spawn(command, {
      shell: true,
      cwd,
      env: { ...process.env, ...env },
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    if (this.child.pid) guardian.add(this.child.pid);
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
    if (this.child.pid) guardian.remove(this.child.pid);
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
