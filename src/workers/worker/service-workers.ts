import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError, type Config } from '../../config/config.js';
import { newUid } from '../../common/ids.js';
import { PACKAGE_ROOT } from '../../common/paths.js';
import { startPeriodic } from '../../common/periodic.js';
import { unsearchableAbove } from '../../common/searchable.js';
import { ROOT_STATE_DIR } from '../../common/shared-runtime.js';
import type { Database } from '../../database/database.js';
import { SERVICE_WORKER_HOST } from '../../runs/run.js';
import { passwordlessUsers, type PasswordlessUser } from '../../database/passwordless.js';
import { DirectBackend } from './direct-backend.js';
import { exampleHarnessCommand } from '../launcher/harness-programs.js';
import { describeEgress, EgressProxy, forwarderInterpreter, type EgressEntry } from './egress-proxy.js';
import type { ExecutionOptions } from './run-execution.js';
import { RepositoryCache } from '../../environments/repository-cache.js';
import { GitRunner } from '../../git/git-runner.js';
import { DefinitionStore } from '../../reconciler/definition-store.js';
import { RepositoryPolicy } from '../../reconciler/repository-policy.js';
import type { RunWakeups } from '../queue/run-wakeups.js';
import { chooseSandbox, SandboxUnavailable, type SandboxChoice } from '../launcher/sandbox.js';
import { SingleTeamGate } from './single-team-gate.js';
import { WorkerPool } from './worker-pool.js';
import type { WorkerRunsService } from '../queue/worker-runs.service.js';
import type { WorkerHarness } from '../queue/workers.repository.js';
import { describeClis, detectClis, harnessesDir, type InstalledCli } from '../../harnesses/installed-clis.js';

/** Heartbeat: a third of the lease, so two can be missed before the run is lost. */
export const heartbeatMs = (config: Config) =>
  Math.max(200, Math.floor((config.workerLeaseSeconds * 1000) / 3));
const SAFETY_POLL_MS = 2000;

/**
 * The agent CLIs this machine has (one detection per process, at its first use): the worker runs
 * and advertises only those that answered `--version`.
 */
export interface HarnessCatalog {
  clis: InstalledCli[];
  /** For the worker registry and the claim: `oz` and each usable CLI's type and version. */
  harnesses: WorkerHarness[];
  /** For the start banner. */
  description: string;
}

let catalog: Promise<HarnessCatalog> | undefined;

export function harnessCatalog(config: Config): Promise<HarnessCatalog> {
  catalog ??= detectClis(process.env, harnessesDir(process.env, config.dataDir)).then((clis) => ({
    clis,
    harnesses: [
      { type: 'oz' },
      ...clis
        .filter((c) => !c.problem)
        .map((c) => ({ type: c.type, ...(c.version ? { version: c.version } : {}) })),
    ],
    description: describeClis(clis),
  }));
  return catalog;
}

/**
 * A report the service did not take, as a log line: the run, which report, and the error's own
 * message (cut short), never what the harness printed.
 */
export function reportFailure(runId: string, report: 'events' | 'end', err: unknown): string {
  const why = (err instanceof Error ? err.message : String(err)).slice(0, 300);
  return `run ${runId}: the ${report === 'end' ? 'end' : 'events'} report failed: ${why}`;
}

/**
 * How this process runs harnesses (its environment's settings), workspaces under `workspaceRoot`,
 * in the sandbox chosen for them (once: `harnessSandbox` is what the start logs), with the CLIs
 * `harnesses` found, their network through an egress proxy that logs to `log`.
 */
export function executionOptions(
  config: Config,
  workspaceRoot: string,
  harnesses: HarnessCatalog,
  log: WorkerLog,
  selfHosted: boolean,
  onReportFailed?: ExecutionOptions['onReportFailed'],
  managedRepositories?: ManagedRepositories,
): ExecutionOptions {
  const sandbox = harnessSandbox(config, workspaceRoot).sandbox;
  return {
    selfHosted,
    clis: Object.fromEntries(harnesses.clis.filter((c) => !c.problem).map((c) => [c.type, c.path])),
    harnessCommand: config.harnessCommand ?? exampleHarnessCommand(),
    repositories: repositoryCache(config, workspaceRoot, managedRepositories),
    killGraceMs: config.harnessKillGraceMs,
    idleMinuteMs: config.idleMinuteMs,
    idleTimeoutMinutes: config.runIdleTimeoutMinutes,
    maxDurationMinutes: config.runMaxDurationMinutes,
    workspaceRoot,
    sandbox,
    envAllow: config.harnessEnvAllow,
    transcriptBudget: { bytes: config.runTranscriptMaxBytes, events: config.runTranscriptMaxEvents },
    onReportFailed,
    egress:
      config.harnessEgress && sandbox.mode !== 'none' && forwarderInterpreter()
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
  error(line: string): void;
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
  else if (mode === 'docker' && config.docker.network === 'bridge')
    log.warn(
      "harness network: Docker's bridge for every container (WORKER_DOCKER_NETWORK=bridge): the internet and this " +
        "machine's addresses, unlogged; only environments with network: none go through factoryd's egress proxy",
    );
  else if (policy && !forwarderInterpreter())
    log.warn(
      'harness network: none at all: the egress forwarder needs perl, and there is none on this machine ' +
        '(Debian and Ubuntu: apt-get install perl-base): harnesses cannot reach their model provider either',
    );
  else {
    const confined =
      mode === 'docker'
        ? `each container on Docker's none network (loopback only; an environment with network: bridge, which the operator must name in WORKER_DOCKER_BRIDGE_ENVIRONMENTS, gets Docker's bridge instead, the host's addresses included, unlogged)`
        : 'a namespace of its own (loopback only), no host sockets';
    log.info(
      policy
        ? `harness network: ${confined}; out only through factoryd's egress proxy: ` +
            `${policy.rules.length} allowed hosts (HARNESS_EGRESS_ALLOW adds more)` +
            (policy.trusted.length
              ? `, and the providers' base URLs ${policy.trusted.map((t) => `${t.host}:${t.port}`).join(', ')}`
              : '') +
            '; loopback, private, link-local and metadata addresses refused'
        : `harness network: none at all (HARNESS_EGRESS_ALLOW=none): ${confined}`,
    );
  }
  if (!config.databaseUrl) return;
  const users = await passwordlessUsers(config.databaseUrl).catch(() => []);
  if (users.length) log.warn(passwordlessWarning(users, mode, config));
}

/**
 * The start's warning of a server that takes users with no password: who, through which ways, and
 * whether harnesses get there. In `none` mode they do; in a namespace of their own they do not; a
 * container on Docker's bridge (the worker's default, or an environment the operator gave it) reaches
 * this machine's addresses through the bridge's gateway, so a server listening beyond loopback.
 */
export function passwordlessWarning(
  users: PasswordlessUser[],
  mode: string,
  config: Pick<Config, 'databaseUrl' | 'docker'>,
): string {
  const who = users
    .map(
      (u) =>
        `user ${u.user} with no password through ${u.ways.join(' and ')}${u.user === 'postgres' ? ' (postgres is the superuser)' : ''}`,
    )
    .join('; ');
  const head = `DATABASE_URL: the server accepts ${who} (trust in pg_hba.conf): `;
  if (mode === 'none')
    return (
      head +
      'every harness can connect as that user and read and change every team’s data. Require a password (scram-sha-256) or confine harnesses (HARNESS_SANDBOX=bwrap or user)'
    );
  const elsewhere = 'but any other process on this machine can: require a password (scram-sha-256)';
  if (mode !== 'docker')
    return (
      head +
      `harnesses cannot reach it (sandbox ${mode}: a network namespace of their own, host sockets hidden, the egress proxy refuses loopback and private addresses), ` +
      elsewhere
    );
  const { network, bridgeEnvironments } = config.docker;
  const bridged =
    network === 'bridge'
      ? 'every container is on Docker’s bridge (WORKER_DOCKER_NETWORK=bridge)'
      : bridgeEnvironments.length
        ? `the containers of ${bridgeEnvironments.map((b) => `${b.team}:${b.environment}`).join(', ')} are on Docker’s bridge (WORKER_DOCKER_BRIDGE_ENVIRONMENTS)`
        : undefined;
  if (!bridged)
    return (
      head +
      'harnesses cannot reach it (each container on Docker’s none network: loopback only, no host sockets, the egress proxy refuses loopback and private addresses), ' +
      elsewhere
    );
  // The sockets and the host's loopback stay out of a bridged container's reach; its other addresses do not.
  const host = new URL(config.databaseUrl ?? 'postgres://localhost').hostname.replace(/^\[|\]$/g, '');
  const loopback =
    host === '' || host === 'localhost' || /^127\./.test(host) || host === '::1' || host.startsWith('%2');
  return (
    head +
    `${bridged}: those reach this machine’s addresses through the bridge’s gateway, unlogged, ` +
    (loopback
      ? 'so they can connect as that user wherever the server listens beyond loopback (listen_addresses) with such a line; '
      : `so they can connect as that user through ${host}; `) +
    'require a password (scram-sha-256), or keep network: none'
  );
}

const caches = new Map<string, RepositoryCache>();

/** The managed repositories of the other teams (DefinitionStore's, on the database). */
type ManagedRepositories = ConstructorParameters<typeof RepositoryPolicy>[1];

/**
 * A self-hosted worker serves its own team alone and has no database: it knows no other team's
 * managed repository (the rest of the policy holds: its DATA_DIR, its FACTORY_REPO_ROOTS, links).
 */
const NO_OTHER_TEAMS: ManagedRepositories = { managedRepositoriesOfOtherTeams: () => Promise.resolve([]) };

/**
 * The machine's repository cache for workspaces under `workspaceRoot`: beside them (the same file
 * system, so a clone moves into its workspace by a rename), hidden from harnesses like them. A local
 * repository an environment names is checked by the policy of factories' repositories, for the
 * run's team: its roots (FACTORY_REPO_ROOTS, `TEAM=/folder` its own), never DATA_DIR or another
 * team's managed repository, no link or `.git` in its git data.
 */
function repositoryCache(
  config: Config,
  workspaceRoot: string,
  managedRepositories: ManagedRepositories = NO_OTHER_TEAMS,
): RepositoryCache {
  const root = join(workspaceRoot, '.repository-cache');
  let cache = caches.get(root);
  if (!cache) {
    const policy = new RepositoryPolicy(config, managedRepositories);
    caches.set(
      root,
      (cache = new RepositoryCache(
        root,
        new GitRunner(config),
        (path, team) => policy.checkEnvironmentRepository(path, team),
        config.repositoryCacheDays,
      )),
    );
  }
  return cache;
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
        docker: config.workerBackend === 'docker' ? config.docker : undefined,
        visible: [harnessesDir(process.env, config.dataDir)],
      },
      workspaceRoot,
    );
  } catch (err) {
    if (err instanceof SandboxUnavailable)
      throw new ConfigError(
        config.workerBackend === 'docker' ? 'WORKER_BACKEND=docker' : 'HARNESS_SANDBOX',
        err.message,
      );
    throw err;
  }
}

/** Where workspaces go as root when the folders above DATA_DIR keep other users out. */
const ROOT_WORKSPACES_DIR = join(ROOT_STATE_DIR, 'workspaces');

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

/**
 * A self-hosted worker's workspaces: its user's own folder under TMPDIR (a shared /tmp holds every
 * user's, and a name without the uid went to whichever user's worker came first).
 */
export function selfHostedWorkspaceRoot(): string {
  return join(tmpdir(), `factoryd-workspaces-${process.getuid?.() ?? 'user'}`);
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
  harnesses: HarnessCatalog,
  onError: (e: unknown) => void,
  log: WorkerLog,
  concurrency = config.workerConcurrency,
  onReportFailed?: ExecutionOptions['onReportFailed'],
  onHarnessStart?: ExecutionOptions['onHarnessStart'],
): WorkerPool {
  const worker = {
    id: `${hostname()}-${process.pid}-${newUid().slice(0, 8)}`,
    host: SERVICE_WORKER_HOST,
    teamId: null,
    slots: concurrency,
    harnesses: harnesses.harnesses,
  };
  const workspaceRoot = serviceWorkspaceRoot(config);
  // Unconfined harnesses would reach every team's data: such workers serve a service of one team only.
  const gate =
    harnessSandbox(config, workspaceRoot).sandbox.mode === 'none' ? new SingleTeamGate(db, log) : undefined;
  const backend = new DirectBackend(service, worker, wakeups, gate && (() => gate.open()));
  const pool = new WorkerPool(backend, {
    ...executionOptions(
      config,
      workspaceRoot,
      harnesses,
      log,
      false,
      onReportFailed,
      new DefinitionStore(db),
    ),
    onHarnessStart,
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
