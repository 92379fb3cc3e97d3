import { resolve } from 'node:path';
import { fromRoot } from '../common/paths.js';

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
  factoryPollSeconds: number;
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
  /** The agent harness started per run (a shell command line); default: the shipped example. */
  harnessCommand: string;
  /** After `cancel` and SIGTERM, how long a harness's process group may linger before SIGKILL. */
  harnessKillGraceMs: number;
  /**
   * How long one minute of a run's `idle_timeout_minutes` and of the run limits lasts here: 60000,
   * except in tests, which shorten it so that the 1–60 minutes callers may ask for can be exercised in seconds.
   */
  idleMinuteMs: number;
  /** Applied to a run that gives no `idle_timeout_minutes` (0: none). */
  runIdleTimeoutMinutes: number;
  /** The longest one execution of a run may take, on any worker (0: no limit). */
  runMaxDurationMinutes: number;
  /**
   * Service-hosted slots (across every replica) one team's runs may hold at once, unless the team has
   * its own (`teams set-slots`). Unset: all slots but one while other teams exist (see docs/workers.md).
   */
  teamMaxSlots?: number;
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

export function loadConfig(env: Env = process.env): Config {
  const dataDir = resolve(str(env, 'DATA_DIR') ?? 'var');
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  return {
    port: int(env, 'PORT', 8080, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    dataDir,
    factoryRepo: str(env, 'FACTORY_REPO'),
    factoryBranch: branch(env, 'FACTORY_BRANCH') ?? 'main',
    factoryPollSeconds: int(env, 'FACTORY_POLL_SECONDS', 10, 1, 86400),
    secretsKey: secretsKey(env),
    publicBaseUrl: url(env, 'PUBLIC_BASE_URL', ['http:', 'https:']),
    webhookBaseUrl: url(env, 'WEBHOOK_BASE_URL', ['http:', 'https:']),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    webhookRateLimitPerMinute: int(env, 'WEBHOOK_RATE_LIMIT_PER_MINUTE', 60, 1, 1_000_000),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 2, 0, 256),
    workerLeaseSeconds: int(env, 'WORKER_LEASE_SECONDS', 30, 1, 3600),
    harnessCommand:
      str(env, 'HARNESS_COMMAND') ?? `"${process.execPath}" "${fromRoot('examples', 'harness', 'agent.js')}"`,
    harnessKillGraceMs: int(env, 'HARNESS_KILL_GRACE_MS', 3000, 0, 600_000),
    idleMinuteMs: int(env, 'IDLE_TIMEOUT_MINUTE_MS', 60_000, 100, 60_000),
    runIdleTimeoutMinutes: int(env, 'RUN_IDLE_TIMEOUT_MINUTES', 15, 0, 1440),
    runMaxDurationMinutes: int(env, 'RUN_MAX_DURATION_MINUTES', 240, 0, 10_080),
    teamMaxSlots:
      str(env, 'TEAM_MAX_SLOTS') === undefined ? undefined : int(env, 'TEAM_MAX_SLOTS', 0, 1, 10_000),
  };
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
