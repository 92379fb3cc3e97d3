import { hostname } from 'node:os';
import type { Command } from 'commander';
import { newUid } from '../../common/ids.js';
import { loadConfig } from '../../config/config.js';
import { HttpBackend, RefusedError } from '../../workers/worker/http-backend.js';
import { narratedBackend } from '../../workers/worker/narrated-backend.js';
import { WorkerPool } from '../../workers/worker/worker-pool.js';
import { API_OPTION_HELP } from '../api-client.js';
import { withServices } from '../context.js';
import { serviceRootOf } from '../local-service.js';
import { workerKeyCommand } from '../../auth/api-key.js';

interface WorkerOptions {
  workerHost?: string;
  api?: string;
  apiKey?: string;
  concurrency?: string;
  backend?: string;
  metrics?: string;
}

/** `factoryd worker`: service-hosted slots on the database, or a self-hosted worker over HTTP(S). */
export function registerWorkerCommands(program: Command): void {
  program
    .command('worker')
    .description(
      'Run agent harnesses for queued runs. Without --worker-host: a service-hosted worker on the database. ' +
        'With --worker-host: a self-hosted worker that connects out to the API and takes only that host’s runs.',
    )
    .option('--worker-host <id>', 'self-hosted worker id; runs with agent_config.worker_host = ID')
    .option('--api <url>', API_OPTION_HELP)
    .option(
      '--api-key <key>',
      'a worker key for this host: `factoryd api-keys create --team T --scopes workers --worker-host ID` (default: $FACTORYD_API_KEY)',
    )
    .option('--concurrency <n>', 'harnesses at a time (default: WORKER_CONCURRENCY)')
    .option(
      '--backend <name>',
      'where harnesses run: host (the HARNESS_SANDBOX sandbox) or docker (a container per run; default: WORKER_BACKEND, else host)',
    )
    .option(
      '--metrics <[host:]port>',
      'serve GET /metrics (Prometheus: harness starts, and on the database claims, reaps and the queue) there, on 127.0.0.1 unless a host is given',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  DATABASE_URL=postgres://… npx factoryd worker --concurrency 8 --metrics 9464\n' +
        '  npx factoryd worker --worker-host build-box --api https://factoryd.example.com --api-key $KEY',
    )
    .action(runWorker);
}

async function runWorker(opts: WorkerOptions): Promise<void> {
  // The option is the variable, checked (and refused with its message) as the variable is.
  const config = loadConfig(opts.backend ? { ...process.env, WORKER_BACKEND: opts.backend } : process.env);
  // Loaded for this command only: other commands start without them (they bring in NestJS).
  const {
    executionOptions,
    harnessCatalog,
    harnessSandbox,
    heartbeatMs,
    reportFailure,
    reportHarnessNetwork,
    selfHostedWorkspaceRoot,
    serviceWorkspaceRoot,
    startHousekeeping,
    startServiceHostedPool,
  } = await import('../../workers/worker/service-workers.js');
  const [{ Metrics, MetricsModule }, { listenForMetrics, metricsAddress }] = await Promise.all([
    import('../../common/metrics.js'),
    import('../../ops/metrics-listener.js'),
  ]);
  if (opts.metrics !== undefined) metricsAddress(opts.metrics); // refused before anything starts
  const concurrency = opts.concurrency ? Number(opts.concurrency) : Math.max(config.workerConcurrency, 1);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256)
    throw new Error(`--concurrency must be a whole number from 1 to 256, got "${opts.concurrency}"`);
  const say = (line: string) => process.stderr.write(`factoryd worker: ${line}\n`);
  const lines = { info: say, warn: say, error: say };
  const log = (err: unknown) => {
    if (err instanceof RefusedError) {
      process.stderr.write(`factoryd worker: ${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`factoryd worker: ${err instanceof Error ? err.message : String(err)}\n`);
  };
  const reportFailed = (runId: string, report: 'events' | 'end', err: unknown) =>
    process.stderr.write(`factoryd worker: error: ${reportFailure(runId, report, err)}\n`);
  if (opts.workerHost) {
    const apiKey = opts.apiKey ?? process.env.FACTORYD_API_KEY;
    if (!opts.api || !apiKey)
      throw new Error('--worker-host needs --api URL and --api-key KEY (or FACTORYD_API_KEY)');
    // The key out of the command line, which any process on the machine may read (/proc/<pid>/cmdline).
    if (opts.apiKey) process.title = 'factoryd worker';
    const api = `${serviceRootOf(opts.api)}/api/v1`;
    const workerId = `${hostname()}-${process.pid}-${newUid().slice(0, 8)}`;
    const workspaceRoot = selfHostedWorkspaceRoot();
    process.stderr.write(
      `factoryd worker: harness sandbox: ${harnessSandbox(config, workspaceRoot).description}\n`,
    );
    const harnesses = await harnessCatalog(config);
    process.stderr.write(
      `factoryd worker: ${harnesses.description.replaceAll('\n', '\nfactoryd worker: ')}\n`,
    );
    void reportHarnessNetwork(config, workspaceRoot, lines);
    const backend = new HttpBackend(api, apiKey, workerId, opts.workerHost, harnesses.harnesses);
    const told = (line: string) => process.stdout.write(`factoryd worker: ${line}\n`);
    let said = false;
    const served = await backend
      .connect((err) => {
        if (!said) log(new Error(`waiting for the API at ${api}: ${(err as Error).message}`));
        said = true;
      })
      .catch((err: unknown) => {
        if (!(err instanceof RefusedError)) throw err;
        // A service older than worker keys has no such route: it checks the key with each request.
        if (err.status === 404) return { worker_host: opts.workerHost!, team: { name: '(not checked)' } };
        throw new Error(
          err.status === 401
            ? `the API key is not valid (unknown or revoked). A self-hosted worker needs a worker key for its host: ` +
                `\`${workerKeyCommand('TEAM', opts.workerHost!)}\``
            : // The API cannot name the host (it refuses before reading the body that names it): this worker can.
              `the API refused this key for worker host ${opts.workerHost} (HTTP ${err.status}): ${err.detail.replaceAll('--worker-host ID', `--worker-host ${opts.workerHost}`)}`,
        );
      });
    const metrics = opts.metrics === undefined ? undefined : new Metrics();
    const listener = metrics && (await listenForMetrics(metrics, opts.metrics!));
    const pool = new WorkerPool(narratedBackend(backend, told), {
      ...executionOptions(config, workspaceRoot, harnesses, lines, true, reportFailed),
      onHarnessStart: metrics?.countHarnessStart,
      concurrency,
      // Follow-ups and cancels arrive with these polls, so they are frequent.
      heartbeatMs: Math.min(1000, heartbeatMs(config)),
      pollMs: 0,
      onError: log,
    });
    pool.start();
    process.stdout.write(
      `factoryd worker ${workerId}: self-hosted "${served.worker_host}" of team ${served.team.name} → ${api}` +
        `${listener ? `; metrics at ${listener.url}` : ''}\n`,
    );
    await stopOnSignal(pool, told);
    await listener?.close();
    return;
  }
  // Checked before the database starts: a backend that cannot run stops the start in one line.
  harnessSandbox(config, serviceWorkspaceRoot(config));
  const [{ Database }, { WorkerRunsModule }, { RunWakeups }, { WorkerRunsService }] = await Promise.all([
    import('../../database/database.js'),
    import('../../workers/queue/worker-runs.module.js'),
    import('../../workers/queue/run-wakeups.js'),
    import('../../workers/queue/worker-runs.service.js'),
  ]);
  // The services `serve` runs its workers on (the run queue, its signals, the wake-ups), from the same
  // modules; only the pool is this command's. NestJS's warnings (a lost LISTEN connection) are kept.
  await withServices(
    async (services, cfg) => {
      const db = services.get(Database);
      const service = services.get(WorkerRunsService);
      const wakeups = services.get(RunWakeups);
      wakeups.start();
      const housekeeping = startHousekeeping(service, cfg, log);
      const workspaces = serviceWorkspaceRoot(cfg);
      const sandbox = harnessSandbox(cfg, workspaces).description;
      process.stderr.write(`factoryd worker: harness sandbox: ${sandbox}; workspaces under ${workspaces}\n`);
      const harnesses = await harnessCatalog(cfg);
      process.stderr.write(
        `factoryd worker: ${harnesses.description.replaceAll('\n', '\nfactoryd worker: ')}\n`,
      );
      void reportHarnessNetwork(cfg, workspaces, lines);
      // Provided (MetricsModule) only with --metrics: the run queue counts claims and reaps, and reads
      // its depths, into it.
      const metrics = opts.metrics === undefined ? undefined : services.get(Metrics);
      const listener = metrics && (await listenForMetrics(metrics, opts.metrics!));
      const pool = startServiceHostedPool(
        db,
        service,
        wakeups,
        cfg,
        harnesses,
        log,
        lines,
        concurrency,
        reportFailed,
        metrics?.countHarnessStart,
      );
      process.stdout.write(
        `factoryd worker: ${concurrency} service-hosted slot(s)${listener ? `; metrics at ${listener.url}` : ''}\n`,
      );
      await stopOnSignal(pool, (line) => process.stdout.write(`factoryd worker: ${line}\n`));
      await listener?.close();
      await housekeeping.stop();
      await wakeups.close();
    },
    {
      config,
      logLevels: ['error', 'warn'],
      modules: [...(opts.metrics === undefined ? [] : [MetricsModule]), WorkerRunsModule],
    },
  );
}

/** Waits for SIGINT or SIGTERM, then stops the pool, saying so before and after. */
async function stopOnSignal(pool: WorkerPool, say: (line: string) => void): Promise<void> {
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  const held = pool.activeRunIds.length;
  say(
    `${signal}: stopping${held ? `; the ${held === 1 ? 'run' : `${held} runs`} it holds end${held === 1 ? 's' : ''} as ERROR (retryable)` : ''}`,
  );
  await pool.stop();
  say('stopped');
}
