import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CALLER_SCOPES, type Scope } from '../../src/auth/api-key.js';
import { AuthRepository } from '../../src/auth/auth.repository.js';
import { AuthService } from '../../src/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../../src/auth/bootstrap.js';
import type { TeamRef } from '../../src/auth/auth-context.js';
import { loadConfig } from '../../src/config/config.js';
import { startService, type RunningService } from '../../src/service.js';
import { createTestDatabase } from './database.js';
import { eventually } from './eventually.js';

export interface TestService {
  service: RunningService;
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** `${url}/api/v1` */
  api: string;
  /** An admin key of the team `default` (every scope but `workers`). */
  adminKey: string;
  defaultTeam: TeamRef;
  auth: AuthService;
  authRepo: AuthRepository;
  /** A new team with a key of the given scopes. */
  newTeam(name: string, scopes?: Scope[]): Promise<{ team: TeamRef; key: string }>;
  newKey(teams: TeamRef[], scopes: Scope[], name?: string): Promise<string>;
  /** A worker key (scope `workers`) for `host` in `team` (default: the team `default`). */
  workerKey(host: string, team?: TeamRef): Promise<string>;
  /** fetch against the service with the admin key (or `key`), JSON in and out. */
  call(
    method: string,
    path: string,
    body?: unknown,
    key?: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any; headers: Headers }>;
  /** The database this service uses (another service may share it: see `sameDatabaseAs`). */
  databaseUrl: string;
  /** Its DATA_DIR (workspaces, managed factories, keys). */
  dataDir: string;
  /** With `captureLog`: every line the service logged so far (at its LOG_LEVEL), restarts included. */
  loggedText(): string;
  /**
   * Stops the service and starts it again on the same port and database (`service` is the new one),
   * once `whileDown` (an outage the test waits through, e.g. until a lease lapsed) resolves.
   */
  restart(opts?: { whileDown?: () => Promise<unknown> }): Promise<void>;
  stop(): Promise<void>;
}

/** The real service on a loopback port and a fresh database: what a test drives over HTTP. */
export async function startTestService(
  env: Record<string, string> = {},
  opts: {
    sameDatabaseAs?: TestService;
    /**
     * Keep what the service logs (at `env.LOG_LEVEL`; set one, the default is silent) for the test to
     * read (`loggedText`), instead of writing it out.
     */
    captureLog?: boolean;
  } = {},
): Promise<TestService> {
  // A second replica shares the first one's database (and leaves dropping it to the first).
  const database = opts.sameDatabaseAs
    ? { url: opts.sameDatabaseAs.databaseUrl, drop: async () => undefined }
    : await createTestDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-test-data-'));
  const config = loadConfig({
    PORT: '0',
    LOG_LEVEL: 'silent',
    DATA_DIR: dataDir,
    // Runs stay QUEUED unless a test starts workers (WORKER_CONCURRENCY) on purpose.
    WORKER_CONCURRENCY: '0',
    // Tests register repositories they make in temp folders (TestRepo).
    FACTORY_REPO_ROOTS: tmpdir(),
    ...env,
    DATABASE_URL: database.url,
  });
  const logged: string[] = [];
  const logDestination = opts.captureLog ? { write: (line: string) => void logged.push(line) } : undefined;
  let service = await startService(config, { logDestination });
  let authRepo = new AuthRepository(service.db);
  let auth = new AuthService(authRepo);
  const adminKey = opts.sameDatabaseAs?.adminKey ?? (await bootstrapDefaultTeam(authRepo, auth))!;
  const defaultTeam = (await authRepo.findTeamByName('default'))!;
  const newKey = async (teams: TeamRef[], scopes: Scope[], name = 'test-key') =>
    (await auth.createApiKey({ teams, scopes, name })).key;
  const url = service.url;
  const call: TestService['call'] = async (method, path, body, key = adminKey, headers = {}) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed, headers: res.headers };
  };
  const t: TestService = {
    service,
    url,
    api: `${url}/api/v1`,
    adminKey,
    defaultTeam,
    auth,
    authRepo,
    newKey,
    async workerKey(host, team = defaultTeam) {
      return (await auth.createApiKey({ teams: [team], scopes: ['workers'], name: host, workerHost: host }))
        .key;
    },
    async newTeam(name, scopes = [...CALLER_SCOPES]) {
      const team = await auth.createTeam(name);
      return { team, key: await newKey([team], scopes) };
    },
    call,
    databaseUrl: database.url,
    dataDir,
    loggedText: () => logged.join(''),
    async restart({ whileDown } = {}) {
      await service.stop();
      await whileDown?.();
      service = t.service = await startService(
        { ...config, port: Number(new URL(url).port) },
        { logDestination },
      );
      authRepo = t.authRepo = new AuthRepository(service.db);
      auth = t.auth = new AuthService(authRepo);
    },
    async stop() {
      await service.stop();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

/** The run (as GET /agent/runs/{id} shows it) once it is in one of `states` (within `timeoutMs`, default 20 s). */
export function runIn(
  on: TestService,
  runId: string,
  states: string[],
  key?: string,
  opts: { timeoutMs?: number } = {},
): Promise<any> {
  return eventually(
    async () => {
      const run = (await on.call('GET', `/api/v1/agent/runs/${runId}`, undefined, key)).body;
      if (states.includes(run.state)) return run;
      throw new Error(`run ${runId} is ${run.state}: ${JSON.stringify(run.status_message)}`);
    },
    `run ${runId} ${states.join('|')}`,
    opts,
  );
}
