import { delimiter, isAbsolute, resolve } from 'node:path';
import { imageProblem } from '../common/docker-image.js';
import {
  baseUrlDestination,
  DEFAULT_EGRESS_HOSTS,
  parseEgressRule,
  PROVIDER_BASE_URL_VARIABLES,
  type EgressPolicy,
} from '../common/egress-policy.js';

/**
 * The service's configuration, read once from the environment and validated at boot. A bad value
 * stops the start with one line that names the variable and says what is wrong (ConfigError).
 */
export interface Config {
  port: number;
  host: string;
  /** Unset: an embedded PostgreSQL under `${dataDir}/pg`. */
  databaseUrl?: string;
  /** Where factoryd keeps its own state (embedded database, generated keys, managed factories). */
  dataDir: string;
  factoryRepo?: string;
  factoryBranch: string;
  /**
   * Folders under which a factory's repository may be a local path (docs/security.md, "Factory
   * registration"): each bound to one team (`team=/folder`), or shared by every team (`/folder`);
   * empty: none beyond FACTORY_REPO and the example factory.
   */
  factoryRepoRoots: RepoRoot[];
  factoryPollSeconds: number;
  /** The time limit of one git call (a fetch, or local plumbing); see GitRunner. */
  gitTimeoutSeconds: number;
  /** 32 bytes; unset with the embedded default: generated under `dataDir`. */
  secretsKey?: Buffer;
  publicBaseUrl?: string;
  webhookBaseUrl?: string;
  redisUrl?: string;
  /** Authenticated deliveries per webhook per minute (contract: 60; raised only for benchmarks). */
  webhookRateLimitPerMinute: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Service-hosted worker slots `factoryd serve` runs in process (0: none). */
  workerConcurrency: number;
  /** How long a claimed run stays owned without a heartbeat before it ends as ERROR. */
  workerLeaseSeconds: number;
  /**
   * The agent harness started per run (a shell command line); undefined: the shipped example
   * (harness-programs.ts: exampleHarnessCommand, resolved where workers start).
   */
  harnessCommand?: string;
  /** After `cancel` and SIGTERM, how long a harness's process group may linger before SIGKILL. */
  harnessKillGraceMs: number;
  /**
   * How long one minute of a run's `idle_timeout_minutes` and of the run limits lasts here: 60000,
   * except in tests, which shorten it so that the 1–60 minutes callers may ask for can be exercised in seconds.
   */
  idleMinuteMs: number;
  /** How harnesses are confined (docs/security.md); unset: the strongest this machine can run. */
  harnessSandbox?: HarnessSandboxMode;
  /** Names of the service's variables a harness also gets (model credentials, say): HARNESS_ENV_ALLOW. */
  harnessEnvAllow: string[];
  /**
   * HARNESS_MODELS: the models the operator offers, each with the harness that runs it, in the
   * operator's order (the first is the default); what `GET /agent/models` lists besides what CLIs report.
   */
  harnessModels: Array<{ harness: HarnessType; modelId: string }>;
  /**
   * Where a sandboxed harness may connect, through factoryd's egress proxy (docs/security.md, "A
   * harness's network"): the defaults and HARNESS_EGRESS_ALLOW, and the providers' base URLs the
   * operator set. Undefined (HARNESS_EGRESS_ALLOW=none): no network at all.
   */
  harnessEgress?: EgressPolicy;
  /** The unprivileged user bwrap sandboxes run as when the service runs as root. */
  harnessUser: { uid: number; gid: number };
  /** HARNESS_SANDBOX=user: each live harness runs as a uid of its own from this range. */
  harnessUids: { first: number; last: number };
  /** WORKER_BACKEND: where a worker runs harnesses: `host` (the sandbox above) or `docker` (a container each). */
  workerBackend: WorkerBackendName;
  /** WORKER_DOCKER_*: the Docker backend's settings (docs/environments.md, "Docker backend"). */
  docker: DockerSettings;
  /** The request line and headers must arrive within this (ms). */
  httpHeadersTimeoutMs: number;
  /** The whole request, headers and body, must arrive within this (ms); then 408 and the connection closes. */
  httpRequestTimeoutMs: number;
  /** An idle keep-alive connection closes after this (ms); above a load balancer's own idle timeout. */
  httpKeepAliveTimeoutMs: number;
  /** Applied to a run that gives no `idle_timeout_minutes` (0: none). */
  runIdleTimeoutMinutes: number;
  /** The longest one execution of a run may take, on any worker (0: no limit). */
  runMaxDurationMinutes: number;
  /**
   * Service-hosted slots (across every replica) one team's runs may hold at once, unless the team has
   * its own (`teams set-slots`). Unset: all slots but one while other teams exist (see docs/workers.md).
   */
  teamMaxSlots?: number;
  /** TEAM_MAX_QUEUED_RUNS: the most runs a team may have queued; one more through the API or a dispatch is a 429. */
  teamMaxQueuedRuns: number;
  /**
   * What one run's harness output may store in its conversation and transcript, over all its
   * executions (RUN_TRANSCRIPT_MAX_BYTES, RUN_TRANSCRIPT_MAX_EVENTS); later output is dropped, with a note.
   */
  runTranscriptMaxBytes: number;
  runTranscriptMaxEvents: number;
  /** How long a verified API key is trusted before the database is asked again (0: every request). */
  apiKeyCacheSeconds: number;
  /**
   * NOTIFICATIONS_ALLOW_PRIVATE_URLS: notification endpoints may be http:// and resolve to loopback
   * or private addresses (tests, self-hosted); default false (docs/notifications.md, "Endpoint URLs").
   */
  notificationsAllowPrivateUrls: boolean;
  /** NOTIFICATIONS_RETRY_SCHEDULE_MS: the pause before each attempt (ms, comma-separated); default Svix's. */
  notificationsRetryScheduleMs: number[];
  /** NOTIFICATIONS_DISABLE_AFTER: failed messages in a row that disable an endpoint (default 5). */
  notificationsDisableAfter: number;
  /** NOTIFICATIONS_TIMEOUT_MS: the time limit of one attempt (default 15000). */
  notificationsTimeoutMs: number;
  /** NOTIFICATIONS_CONNECTIONS_PER_ENDPOINT: attempts in flight to one endpoint per dispatcher (default 32). */
  notificationsConnectionsPerEndpoint: number;
  /** REPOSITORY_CACHE_DAYS: days a worker keeps a repository mirror no run used (default 14; 0: forever). */
  repositoryCacheDays: number;
  /** NOTIFICATIONS_RETENTION_DAYS: days a settled message (delivered, or failed for good) is kept (default 30). */
  notificationsRetentionDays: number;
  /**
   * Whether `factoryd serve` runs a notification dispatcher beside the API (default true);
   * `factoryd serve --role api` leaves them to processes of their own (`--role notifications`).
   */
  notificationsDispatcher: boolean;
}

const WORKER_BACKENDS = ['host', 'docker'] as const;
export type WorkerBackendName = (typeof WORKER_BACKENDS)[number];

export interface DockerSettings {
  /** For runs whose environment names no `docker_image`. */
  image: string;
  cpus: string;
  memory: string;
  pids: number;
  /** For runs whose environment names no network mode. */
  network: 'none' | 'bridge';
  /**
   * WORKER_DOCKER_BRIDGE_ENVIRONMENTS: the environments (a team's name and the environment's) whose
   * file may ask for `network: bridge`. Any other is refused when it applies and when a run is claimed:
   * a team must not give itself Docker's bridge (the host's ports, cloud metadata, unlogged).
   */
  bridgeEnvironments: BridgeEnvironment[];
  keepFailedSeconds: number;
  /** More host paths every container gets read-only at the same path (an agent CLI installed elsewhere). */
  mounts: string[];
}

/** One environment the operator gives Docker's bridge: `TEAM:ENVIRONMENT`. */
export interface BridgeEnvironment {
  team: string;
  environment: string;
}

/** Whether the operator gave `team`'s environment `environment` Docker's bridge (WORKER_DOCKER_BRIDGE_ENVIRONMENTS). */
export function bridgeAllowed(
  list: readonly BridgeEnvironment[],
  team: string,
  environment: string,
): boolean {
  return list.some((b) => b.team === team && b.environment === environment);
}

const HARNESS_SANDBOX_MODES = ['bwrap', 'user', 'none'] as const;
export type HarnessSandboxMode = (typeof HARNESS_SANDBOX_MODES)[number];

/** The harness types of the Oz clients' `harness.type`. */
export const HARNESS_TYPES = ['oz', 'claude', 'codex', 'gemini'] as const;
export type HarnessType = (typeof HARNESS_TYPES)[number];

/**
 * Variables a harness never gets, even when HARNESS_ENV_ALLOW names them: the service's own
 * configuration and credentials (every variable read here, a worker's API key, libpq's).
 */
export const SERVICE_VARIABLES = [
  'PORT',
  'HOST',
  'DATABASE_URL',
  'DATA_DIR',
  'FACTORY_REPO',
  'FACTORY_BRANCH',
  'FACTORY_POLL_SECONDS',
  'SECRETS_KEY',
  'PUBLIC_BASE_URL',
  'WEBHOOK_BASE_URL',
  'REDIS_URL',
  'WEBHOOK_RATE_LIMIT_PER_MINUTE',
  'LOG_LEVEL',
  'WORKER_CONCURRENCY',
  'WORKER_LEASE_SECONDS',
  'HARNESS_COMMAND',
  'HARNESS_KILL_GRACE_MS',
  'IDLE_TIMEOUT_MINUTE_MS',
  'HARNESS_SANDBOX',
  'HARNESS_ENV_ALLOW',
  'HARNESS_MODELS',
  'HARNESS_EGRESS_ALLOW',
  'HARNESS_EGRESS_TRUST',
  'HARNESS_UID',
  'HARNESS_UIDS',
  'WORKER_BACKEND',
  'WORKER_DOCKER_IMAGE',
  'WORKER_DOCKER_CPUS',
  'WORKER_DOCKER_MEMORY',
  'WORKER_DOCKER_PIDS',
  'WORKER_DOCKER_NETWORK',
  'WORKER_DOCKER_BRIDGE_ENVIRONMENTS',
  'WORKER_DOCKER_KEEP_FAILED_SECONDS',
  'WORKER_DOCKER_MOUNTS',
  'FACTORY_REPO_ROOTS',
  'GIT_TIMEOUT_SECONDS',
  'REPOSITORY_CACHE_DAYS',
  'HTTP_HEADERS_TIMEOUT_MS',
  'HTTP_REQUEST_TIMEOUT_MS',
  'HTTP_KEEP_ALIVE_TIMEOUT_MS',
  'RUN_IDLE_TIMEOUT_MINUTES',
  'RUN_MAX_DURATION_MINUTES',
  'TEAM_MAX_SLOTS',
  'TEAM_MAX_QUEUED_RUNS',
  'RUN_TRANSCRIPT_MAX_BYTES',
  'RUN_TRANSCRIPT_MAX_EVENTS',
  'API_KEY_CACHE_SECONDS',
  'NOTIFICATIONS_ALLOW_PRIVATE_URLS',
  'NOTIFICATIONS_RETRY_SCHEDULE_MS',
  'NOTIFICATIONS_DISABLE_AFTER',
  'NOTIFICATIONS_TIMEOUT_MS',
  'NOTIFICATIONS_CONNECTIONS_PER_ENDPOINT',
  'NOTIFICATIONS_RETENTION_DAYS',
];
const refusedInHarness = (name: string) =>
  SERVICE_VARIABLES.includes(name) || name.startsWith('FACTORYD_') || name.startsWith('PG');

/** A folder local repositories may live under, and the one team it is for (none: every team). */
export interface RepoRoot {
  folder: string;
  team?: string;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`${variable}: ${reason}`);
  }
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** DATA_DIR, absolute: also read alone by CLI commands that need nothing else (the local service's address). */
export function dataDirOf(env: Env = process.env): string {
  return resolve(str(env, 'DATA_DIR') ?? 'var');
}

export function loadConfig(env: Env = process.env): Config {
  const dataDir = dataDirOf(env);
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    dataDir,
    factoryRepo: str(env, 'FACTORY_REPO'),
    factoryBranch: branch(env, 'FACTORY_BRANCH') ?? 'main',
    factoryRepoRoots: repoRoots(env),
    factoryPollSeconds: int(env, 'FACTORY_POLL_SECONDS', 10, 1, 86400),
    gitTimeoutSeconds: int(env, 'GIT_TIMEOUT_SECONDS', 60, 1, 3600),
    repositoryCacheDays: int(env, 'REPOSITORY_CACHE_DAYS', 14, 0, 3650),
    secretsKey: secretsKey(env),
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL', ['http:', 'https:']),
    webhookBaseUrl: url(env, 'WEBHOOK_BASE_URL', ['http:', 'https:']),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    webhookRateLimitPerMinute: int(env, 'WEBHOOK_RATE_LIMIT_PER_MINUTE', 60, 1, 1_000_000),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 2, 0, 256),
    workerLeaseSeconds: int(env, 'WORKER_LEASE_SECONDS', 30, 1, 3600),
    harnessCommand: str(env, 'HARNESS_COMMAND'),
    harnessKillGraceMs: int(env, 'HARNESS_KILL_GRACE_MS', 3000, 0, 600_000),
    idleMinuteMs: int(env, 'IDLE_TIMEOUT_MINUTE_MS', 60_000, 100, 60_000),
    harnessSandbox:
      str(env, 'HARNESS_SANDBOX') === undefined
        ? undefined
        : oneOf(env, 'HARNESS_SANDBOX', HARNESS_SANDBOX_MODES, 'none'),
    harnessEnvAllow: harnessEnvAllow(env),
    harnessModels: harnessModels(env),
    harnessEgress: harnessEgress(env),
    harnessUser: harnessUser(env),
    harnessUids: harnessUids(env),
    workerBackend: oneOf(env, 'WORKER_BACKEND', WORKER_BACKENDS, 'host'),
    docker: dockerSettings(env),
    ...httpTimeouts(env),
    runIdleTimeoutMinutes: int(env, 'RUN_IDLE_TIMEOUT_MINUTES', 15, 0, 1440),
    runMaxDurationMinutes: int(env, 'RUN_MAX_DURATION_MINUTES', 240, 0, 10_080),
    teamMaxSlots:
      str(env, 'TEAM_MAX_SLOTS') === undefined ? undefined : int(env, 'TEAM_MAX_SLOTS', 0, 1, 10_000),
    teamMaxQueuedRuns: int(env, 'TEAM_MAX_QUEUED_RUNS', 10_000, 1, 10_000_000),
    runTranscriptMaxBytes: int(env, 'RUN_TRANSCRIPT_MAX_BYTES', 16 * 1024 * 1024, 65_536, 1024 ** 3),
    runTranscriptMaxEvents: int(env, 'RUN_TRANSCRIPT_MAX_EVENTS', 20_000, 100, 10_000_000),
    apiKeyCacheSeconds: int(env, 'API_KEY_CACHE_SECONDS', 10, 0, 60),
    notificationsAllowPrivateUrls:
      oneOf(env, 'NOTIFICATIONS_ALLOW_PRIVATE_URLS', ['true', 'false'], 'false') === 'true',
    notificationsRetryScheduleMs: retrySchedule(env),
    notificationsDisableAfter: int(env, 'NOTIFICATIONS_DISABLE_AFTER', 5, 1, 1000),
    notificationsTimeoutMs: int(env, 'NOTIFICATIONS_TIMEOUT_MS', 15_000, 100, 60_000),
    notificationsConnectionsPerEndpoint: int(env, 'NOTIFICATIONS_CONNECTIONS_PER_ENDPOINT', 32, 1, 256),
    notificationsRetentionDays: int(env, 'NOTIFICATIONS_RETENTION_DAYS', 30, 1, 3650),
    notificationsDispatcher: true,
  };
}

/** Svix's: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (docs/notifications.md). */
const DEFAULT_RETRY_SCHEDULE_MS = [
  0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
];

function retrySchedule(env: Env): number[] {
  const v = str(env, 'NOTIFICATIONS_RETRY_SCHEDULE_MS');
  if (v === undefined) return DEFAULT_RETRY_SCHEDULE_MS;
  const parts = v.split(',').map((p) => p.trim());
  if (parts.length < 1 || parts.length > 20 || parts.some((p) => !/^\d{1,9}$/.test(p)))
    throw new ConfigError(
      'NOTIFICATIONS_RETRY_SCHEDULE_MS',
      `must be 1-20 comma-separated pauses in milliseconds (e.g. 0,5000,300000), got "${v}"`,
    );
  return parts.map(Number);
}

function harnessEnvAllow(env: Env): string[] {
  const names = (str(env, 'HARNESS_ENV_ALLOW') ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  for (const name of names) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new ConfigError('HARNESS_ENV_ALLOW', `"${name}" is not a variable name (comma-separated names)`);
    if (refusedInHarness(name))
      throw new ConfigError(
        'HARNESS_ENV_ALLOW',
        `${name} is the service's own configuration or a credential (FACTORYD_*, PG*, factoryd's variables) and never goes to a harness`,
      );
  }
  return names;
}

/** `claude:claude-sonnet-4-5,codex:gpt-5-codex`: harness and model id pairs, comma-separated. */
function harnessModels(env: Env): Config['harnessModels'] {
  const out: Config['harnessModels'] = [];
  for (const entry of (str(env, 'HARNESS_MODELS') ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const at = entry.indexOf(':');
    const harness = entry.slice(0, at) as HarnessType;
    const modelId = entry.slice(at + 1);
    if (at < 0 || !HARNESS_TYPES.includes(harness) || !/^[\x21-\x7e]{1,200}$/.test(modelId))
      throw new ConfigError(
        'HARNESS_MODELS',
        `"${entry}" is not <harness>:<model id> (harness one of ${HARNESS_TYPES.join(', ')}; model id printable, no spaces or commas), e.g. claude:claude-sonnet-4-5`,
      );
    if (!out.some((m) => m.harness === harness && m.modelId === modelId)) out.push({ harness, modelId });
  }
  return out;
}

/**
 * HARNESS_EGRESS_ALLOW: `none`, or hosts added to the defaults (`host`, `*.domain`, `*` for any public
 * host, each with an optional `:port`; without one, 80 and 443). The providers' base URLs
 * (ANTHROPIC_BASE_URL, …) and HARNESS_EGRESS_TRUST's URLs are the operator's choice and trusted
 * wherever they point, loopback and private addresses included.
 */
function harnessEgress(env: Env): EgressPolicy | undefined {
  const v = str(env, 'HARNESS_EGRESS_ALLOW') ?? '';
  if (v.trim() === 'none') return undefined;
  const rules = [...DEFAULT_EGRESS_HOSTS, ...v.split(',').filter((h) => h.trim())].map((text) => {
    const rule = parseEgressRule(text);
    if (!rule)
      throw new ConfigError(
        'HARNESS_EGRESS_ALLOW',
        `"${text.trim()}" is not a host, *.domain or * with an optional :port (comma-separated), nor "none"`,
      );
    return rule;
  });
  const trusted = PROVIDER_BASE_URL_VARIABLES.flatMap((name) => {
    const value = str(env, name);
    if (value === undefined) return [];
    const dest = baseUrlDestination(value);
    if (!dest)
      throw new ConfigError(
        name,
        'must be an http:// or https:// URL (harnesses reach it through the egress proxy)',
      );
    return [dest];
  });
  // Endpoints the operator trusts beyond the providers' (a gateway, a git server on a private address).
  for (const url of (str(env, 'HARNESS_EGRESS_TRUST') ?? '').split(',').filter((u) => u.trim())) {
    const dest = baseUrlDestination(url.trim());
    if (!dest)
      throw new ConfigError(
        'HARNESS_EGRESS_TRUST',
        `"${url.trim()}" is not an http:// or https:// URL (comma-separated)`,
      );
    trusted.push(dest);
  }
  return { rules, trusted };
}

/** `first-last`: uids no account on the machine uses (default 1900000-1904095, 4096 harnesses at once). */
function harnessUids(env: Env): { first: number; last: number } {
  const v = str(env, 'HARNESS_UIDS') ?? '1900000-1904095';
  const m = /^(\d+)-(\d+)$/.exec(v);
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2]) : NaN;
  if (!m || first < 1 || last < first || last > 2 ** 32 - 2)
    throw new ConfigError('HARNESS_UIDS', `must be a range of uids FIRST-LAST above 0, got "${v}"`);
  return { first, last };
}

/** `uid` or `uid:gid` (the gid defaults to the uid); 65534 (nobody) by default. */
function harnessUser(env: Env): { uid: number; gid: number } {
  const v = str(env, 'HARNESS_UID') ?? '65534';
  const m = /^(\d+)(?::(\d+))?$/.exec(v);
  const uid = m ? Number(m[1]) : NaN;
  const gid = m?.[2] !== undefined ? Number(m[2]) : uid;
  if (!m || uid < 1 || gid < 1 || uid > 2 ** 32 - 2 || gid > 2 ** 32 - 2)
    throw new ConfigError('HARNESS_UID', `must be a uid or uid:gid other than 0 (root), got "${v}"`);
  return { uid, gid };
}

function dockerSettings(env: Env): DockerSettings {
  const image = str(env, 'WORKER_DOCKER_IMAGE') ?? 'debian:bookworm-slim';
  const badImage = imageProblem(image);
  if (badImage) throw new ConfigError('WORKER_DOCKER_IMAGE', badImage);
  const cpus = str(env, 'WORKER_DOCKER_CPUS') ?? '2';
  if (!/^\d{1,4}(\.\d{1,3})?$/.test(cpus) || Number(cpus) <= 0)
    throw new ConfigError(
      'WORKER_DOCKER_CPUS',
      `must be a number of CPUs above 0 (e.g. 2 or 0.5), got "${cpus}"`,
    );
  const memory = (str(env, 'WORKER_DOCKER_MEMORY') ?? '4g').toLowerCase();
  const unit = { b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30 }[memory.at(-1) ?? ''] ?? 1;
  if (!/^\d{1,12}[bkmg]?$/.test(memory) || parseInt(memory, 10) * unit < 6 * 2 ** 20)
    throw new ConfigError(
      'WORKER_DOCKER_MEMORY',
      `must be a size of at least 6m, with a unit b, k, m or g (e.g. 4g), got "${memory}"`,
    );
  const mounts = folders(env, 'WORKER_DOCKER_MOUNTS');
  const refused = mounts.find(
    (m) => m === '/' || /(^|\/)docker\.sock$/.test(m) || ['/run', '/var/run'].includes(m),
  );
  if (refused)
    throw new ConfigError(
      'WORKER_DOCKER_MOUNTS',
      `${refused} would give containers the whole machine or the Docker socket; name the folders a harness needs`,
    );
  return {
    image,
    cpus,
    memory,
    pids: int(env, 'WORKER_DOCKER_PIDS', 1024, 16, 4_194_304),
    network: oneOf(env, 'WORKER_DOCKER_NETWORK', ['none', 'bridge'] as const, 'none'),
    bridgeEnvironments: bridgeEnvironments(env),
    keepFailedSeconds: int(env, 'WORKER_DOCKER_KEEP_FAILED_SECONDS', 3600, 0, 7 * 86400),
    mounts,
  };
}

/**
 * WORKER_DOCKER_BRIDGE_ENVIRONMENTS: comma-separated `TEAM:ENVIRONMENT` (as HARNESS_MODELS pairs
 * `harness:model`), e.g. `acme:build,acme:release`; a team's and an environment's name as each is spelled.
 */
function bridgeEnvironments(env: Env): BridgeEnvironment[] {
  const name = 'WORKER_DOCKER_BRIDGE_ENVIRONMENTS';
  return (str(env, name) ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^([^:]*):(.*)$/.exec(entry);
      if (!m || !TEAM_NAME.test(m[1]!) || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(m[2]!))
        throw new ConfigError(
          name,
          `"${entry}" is not TEAM:ENVIRONMENT (a team's name, a colon, an environment's name; comma-separated), e.g. acme:build`,
        );
      return { team: m[1]!, environment: m[2]! };
    });
}

function httpTimeouts(env: Env) {
  const httpRequestTimeoutMs = int(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 3_600_000);
  // Node refuses to start with a headers timeout above the request timeout: say so by name.
  const httpHeadersTimeoutMs = int(
    env,
    'HTTP_HEADERS_TIMEOUT_MS',
    Math.min(10_000, httpRequestTimeoutMs),
    100,
    httpRequestTimeoutMs,
  );
  const httpKeepAliveTimeoutMs = int(env, 'HTTP_KEEP_ALIVE_TIMEOUT_MS', 72_000, 1000, 600_000);
  return { httpHeadersTimeoutMs, httpRequestTimeoutMs, httpKeepAliveTimeoutMs };
}

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

export function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v))
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be from ${min} to ${max}, got ${n}`);
  return n;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
  }
  return v as T;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    // Never echo the value: URLs here may carry passwords.
    throw new ConfigError(
      name,
      `is not a valid URL (expected ${protocols.map((p) => `${p}//…`).join(' or ')})`,
    );
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
  }
  return v.replace(/\/+$/, '');
}

function branch(env: Env, name: string): string | undefined {
  const v = str(env, name);
  if (v !== undefined && !/^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/.test(v)) {
    throw new ConfigError(name, `is not a valid git branch name: "${v}"`);
  }
  return v;
}

/**
 * FACTORY_REPO_ROOTS: entries separated by the platform's path delimiter (`:`), like PATH; each an
 * absolute folder bound to a team (`acme=/srv/repos/acme`) or, alone, shared by every team.
 */
function folders(env: Env, name: string): string[] {
  const v = str(env, name);
  if (v === undefined) return [];
  const list = v.split(delimiter).filter((f) => f.trim() !== '');
  const relative = list.find((f) => !isAbsolute(f));
  if (relative !== undefined)
    throw new ConfigError(name, `must list absolute folders separated by "${delimiter}", got "${relative}"`);
  return list.map((f) => resolve(f));
}

function repoRoots(env: Env): RepoRoot[] {
  const name = 'FACTORY_REPO_ROOTS';
  const v = str(env, name);
  if (v === undefined) return [];
  return v
    .split(delimiter)
    .filter((entry) => entry.trim() !== '')
    .map((entry) => {
      const bound = /^([^=/]*)=(.*)$/.exec(entry);
      const [team, folder] = bound ? [bound[1], bound[2]] : [undefined, entry];
      if (team !== undefined && !TEAM_NAME.test(team))
        throw new ConfigError(
          name,
          `"${team}" in "${entry}" is not a team name (a-z, 0-9 and -): bind a folder to a team as TEAM=/folder`,
        );
      if (!isAbsolute(folder))
        throw new ConfigError(
          name,
          `must list absolute folders (or TEAM=/folder) separated by "${delimiter}", got "${entry}"`,
        );
      return team === undefined ? { folder: resolve(folder) } : { folder: resolve(folder), team };
    });
}

/** What a team's name may be (AuthService.createTeam; a FACTORY_REPO_ROOTS binding). */
export const TEAM_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

function secretsKey(env: Env): Buffer | undefined {
  const v = str(env, 'SECRETS_KEY');
  if (v === undefined) return undefined;
  const key = Buffer.from(v, 'base64');
  if (key.length !== 32 || key.toString('base64').replace(/=+$/, '') !== v.replace(/=+$/, '')) {
    throw new ConfigError(
      'SECRETS_KEY',
      'must be 32 bytes encoded as base64 (e.g. `openssl rand -base64 32`)',
    );
  }
  return key;
}

export const CONFIG = Symbol('CONFIG');
