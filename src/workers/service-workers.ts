import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, type Config } from '../config/config.js';
import { newUid } from '../common/ids.js';
import { PACKAGE_ROOT } from '../common/paths.js';
import { startPeriodic } from '../common/periodic.js';
import { unsearchableAbove } from '../common/searchable.js';
import type { Database } from '../database/database.js';
import { SERVICE_WORKER_HOST } from '../runs/run.js';
import { passwordlessWays } from '../database/passwordless.js';
import { DirectBackend } from './direct-backend.js';
import { describeEgress, EgressProxy, type EgressEntry } from './egress-proxy.js';
import type { ExecutionOptions } from './run-execution.js';
import type { RunWakeups } from './run-wakeups.js';
import { chooseSandbox, SandboxUnavailable, type SandboxChoice } from './sandbox.js';
import { WorkerPool } from './worker-pool.js';
import type { WorkerRunsService } from './worker-runs.service.js';

/** Heartbeat: a third of the lease, so two can be missed before the run is lost. */
export const heartbeatMs = (config: Config) =>
  Math.max(200, Math.floor((config.workerLeaseSeconds * 1000) / 3));
const SAFETY_POLL_MS = 2000;

/**
 * How this process runs harnesses (its environment's settings), workspaces under `workspaceRoot`,
 * in the sandbox chosen for them (once: `harnessSandbox` is what the start logs).
 */
export function executionOptions(config: Config, workspaceRoot: string, log: WorkerLog): ExecutionOptions {
  const sandbox = harnessSandbox(config, workspaceRoot).sandbox;
  return {
    harnessCommand: config.harnessCommand,
    killGraceMs: config.harnessKillGraceMs,
    idleMinuteMs: config.idleMinuteMs,
    idleTimeoutMinutes: config.runIdleTimeoutMinutes,
    maxDurationMinutes: config.runMaxDurationMinutes,
    workspaceRoot,
    sandbox,
    envAllow: config.harnessEnvAllow,
    egress:
      config.harnessEgress && sandbox.mode !== 'none'
        ? new EgressProxy(config.harnessEgress, (entry: EgressEntry) =>
            entry.allowed ? log.info(describeEgress(entry)) : log.warn(describeEgress(entry)),
          )
        : undefined,
  };
}

/** Where a worker's lines go: the service's logger, or a self-hosted worker's stderr. */
export interface WorkerLog {
  info(line: string): void;
  warn(line: string): void;
}

/**
 * What the start says of the harnesses' network: in a sandbox, a namespace of their own and the
 * egress policy; in `none` mode, loudly, that they reach everything. And, when DATABASE_URL's server
 * takes its user with no password from this machine, which ways and whether harnesses reach them.
 */
export async function reportHarnessNetwork(
  config: Config,
  workspaceRoot: string,
  log: WorkerLog,
): Promise<void> {
  const { mode } = harnessSandbox(config, workspaceRoot).sandbox;
  const policy = config.harnessEgress;
  if (mode === 'none')
    log.warn(
      'harness network: NOT CONFINED (sandbox none): harnesses reach every address and socket this machine reaches — ' +
        "the database, the service's own port, other local services, cloud metadata (169.254.169.254). " +
        'Fit only for a single trusted team; use bwrap (apt-get install bubblewrap) or run the service as root for user mode',
    );
  else
    log.info(
      policy
        ? `harness network: a namespace of its own (loopback only), no host sockets; out only through factoryd's egress proxy: ` +
            `${policy.rules.length} allowed hosts (HARNESS_EGRESS_ALLOW adds more)` +
            (policy.trusted.length
              ? `, and the providers' base URLs ${policy.trusted.map((t) => `${t.host}:${t.port}`).join(', ')}`
              : '') +
            '; loopback, private, link-local and metadata addresses refused'
        : 'harness network: none at all (HARNESS_EGRESS_ALLOW=none): a namespace of its own, loopback only',
    );
  if (!config.databaseUrl) return;
  const ways = await passwordlessWays(config.databaseUrl).catch(() => []);
  if (!ways.length) return;
  const user = decodeURIComponent(new URL(config.databaseUrl).username) || 'postgres';
  log.warn(
    `DATABASE_URL: the server accepts user ${user} with no password through ${ways.join(' and ')} (trust in pg_hba.conf): ` +
      (mode === 'none'
        ? 'every harness can connect as that user and read and change every team’s data. Require a password (scram-sha-256) or confine harnesses (HARNESS_SANDBOX=bwrap or user)'
        : `harnesses cannot reach it (sandbox ${mode}: a network namespace of their own, host sockets hidden, the egress proxy refuses loopback and private addresses), ` +
          'but any other process on this machine can: require a password (scram-sha-256)'),
  );
}

/** The sandbox of harnesses with workspaces under `workspaceRoot` (probed on the first call). */
export function harnessSandbox(config: Config, workspaceRoot: string): SandboxChoice {
  try {
    return chooseSandbox(
      {
        requested: config.harnessSandbox,
        harnessUser: config.harnessUser,
        harnessUids: config.harnessUids,
        dataDir: config.dataDir,
        packageRoot: PACKAGE_ROOT.replace(/\/$/, ''),
      },
      workspaceRoot,
    );
  } catch (err) {
    if (err instanceof SandboxUnavailable) throw new ConfigError('HARNESS_SANDBOX', err.message);
    throw err;
  }
}

/** Where workspaces go as root when the folders above DATA_DIR keep other users out. */
export const ROOT_WORKSPACES_DIR = '/var/lib/factoryd/workspaces';

/**
 * Workspaces of this machine's workers: `$DATA_DIR/workspaces`. As root, harnesses run as other uids
 * (HARNESS_UID, HARNESS_UIDS), which must pass through every folder above their workspace to open
 * files in it by absolute path; when a folder above DATA_DIR does not let them (a checkout under
 * /root, a `mktemp -d`), the workspaces go to a folder of this DATA_DIR's own under
 * ROOT_WORKSPACES_DIR instead (the start logs the root it uses).
 */
export function serviceWorkspaceRoot(config: Config): string {
  if (process.getuid?.() !== 0 || !unsearchableAbove(config.dataDir))
    return join(config.dataDir, 'workspaces');
  const id = createHash('sha256').update(resolve(config.dataDir)).digest('hex').slice(0, 16);
  mkdirSync(ROOT_WORKSPACES_DIR, { recursive: true, mode: 0o755 });
  return join(ROOT_WORKSPACES_DIR, id);
}

export interface Housekeeping {
  stop(): Promise<void>;
}

/**
 * The reaper (lapsed leases → ERROR; runs over RUN_MAX_DURATION_MINUTES whose worker did not stop them →
 * FAILED) and the "no self-hosted worker connected" notes; any process may run it. The reaper starts one lease after the process: leases that lapsed while the API was
 * down were not the workers' fault, and a live worker renews its lease within a heartbeat of the
 * API's return (a worker that died with it is reaped one lease later).
 */
export function startHousekeeping(
  service: WorkerRunsService,
  config: Config,
  onError: (e: unknown) => void,
): Housekeeping {
  const reapFrom = Date.now() + config.workerLeaseSeconds * 1000;
  return startPeriodic({
    everyMs: Math.min(1000, heartbeatMs(config)),
    run: async () => {
      if (Date.now() >= reapFrom) {
        await service.reap();
        await service.endOverdue();
      }
      await service.markUnservedHosts();
    },
    onError,
  });
}

/** Service-hosted workers (SERVICE_WORKER_HOST): `concurrency` slots straight on the database, woken by NOTIFY. */
export function startServiceHostedPool(
  db: Database,
  service: WorkerRunsService,
  wakeups: RunWakeups,
  config: Config,
  onError: (e: unknown) => void,
  log: WorkerLog,
  concurrency = config.workerConcurrency,
): WorkerPool {
  const worker = {
    id: `${hostname()}-${process.pid}-${newUid().slice(0, 8)}`,
    host: SERVICE_WORKER_HOST,
    teamId: null,
    slots: concurrency,
  };
  const pool = new WorkerPool(new DirectBackend(service, worker, wakeups), {
    ...executionOptions(config, serviceWorkspaceRoot(config), log),
    concurrency,
    heartbeatMs: heartbeatMs(config),
    pollMs: SAFETY_POLL_MS,
    onError,
  });
  wakeups.on('control', (runId: string) => void pool.control(runId).catch(onError));
  // Follow-ups and cancels sent while the listener was cut off: looked up now, not at the next heartbeat.
  wakeups.on('resync', () => {
    for (const runId of pool.activeRunIds) void pool.control(runId).catch(onError);
  });
  pool.start();
  return pool;
}
