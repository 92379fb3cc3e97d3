import { closeSync, fchmodSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import type { Command } from 'commander';
import { AuthRepository } from '../../auth/auth.repository.js';
import { AuthService } from '../../auth/auth.service.js';
import { bootstrapDefaultTeam } from '../../auth/bootstrap.js';
import { ConfigError, loadConfig } from '../../config/config.js';
import { findLocalService, recordLocalService } from '../local-service.js';

export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description(
      'Start the API, webhook ingress, reconciler and service-hosted workers (what `npm start` runs).',
    )
    .option(
      '--role <role>',
      'all (the default): everything; api: everything but the notification dispatcher; ' +
        'notifications: the notification dispatcher alone (no HTTP), on the database of the others',
      'all',
    )
    .option(
      '--metrics <[host:]port>',
      'with --role notifications: serve GET /metrics (Prometheus) there, on 127.0.0.1 unless a host is given ' +
        '(the other roles serve it on the API port)',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  PORT=9000 npx factoryd serve\n' +
        '  DATABASE_URL=postgres://… npx factoryd serve --role api            # API replicas\n' +
        '  DATABASE_URL=postgres://… npx factoryd serve --role notifications --metrics 9464  # as many dispatchers as wanted',
    )
    .action(serve);
}

const ROLES = ['all', 'api', 'notifications'] as const;

async function serve(opts: { role: string; metrics?: string }): Promise<void> {
  if (!(ROLES as readonly string[]).includes(opts.role)) {
    process.stderr.write(`factoryd: --role must be one of ${ROLES.join(', ')}, got "${opts.role}"\n`);
    process.exit(2);
  }
  if (opts.metrics !== undefined) {
    const { metricsAddress } = await import('../../ops/metrics-listener.js');
    try {
      if (opts.role !== 'notifications')
        throw new Error(
          `--metrics is for --role notifications, which serves no HTTP; --role ${opts.role} serves GET /metrics on the API's port`,
        );
      metricsAddress(opts.metrics);
    } catch (err) {
      process.stderr.write(`factoryd: ${(err as Error).message}\n`);
      process.exit(2);
    }
  }
  let config;
  try {
    config = { ...loadConfig(), notificationsDispatcher: opts.role !== 'api' };
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`factoryd: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  if (opts.role === 'notifications') {
    if (!config.databaseUrl) {
      process.stderr.write(
        'factoryd: --role notifications sends from the database of the API processes: set DATABASE_URL to it ' +
          '(the embedded database serves `factoryd serve` alone, which sends its notifications itself)\n',
      );
      process.exit(2);
    }
    return serveNotifications(opts.metrics);
  }
  // The embedded database belongs to the `serve` that started it: a second one on the same DATA_DIR
  // would run on it, and lose it the moment the first stops.
  const running = config.databaseUrl ? undefined : findLocalService(config.dataDir);
  if (running?.database === 'embedded') {
    process.stderr.write(
      `factoryd: another factoryd serve (pid ${running.pid}, ${running.url}) runs on the embedded database ` +
        `under ${shown(config.dataDir)}: use that one (the CLI finds it by itself), stop it first, ` +
        'or give this one a DATA_DIR of its own\n',
    );
    process.exit(2);
  }
  // Loaded here, not at the top: every other command (an API client, say) starts without NestJS.
  const { startService } = await import('../../service.js');
  const { bootstrapFactory } = await import('../factory-bootstrap.js');
  // One listener per signal for the process's life, whose action changes with the phase: removing a
  // listener and adding another stops and restarts Node's signal watcher, and a signal caught between
  // the two is dropped (a SIGTERM sent as the banner appeared was lost so, and the process ran on).
  // Before the service is up a signal ends the process at once: its `exit` stops an embedded database.
  let onSignal: (signal: NodeJS.Signals) => void = () => process.exit(1);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => onSignal(signal));
  const service = await startService(config);
  const adminKey = await bootstrapDefaultTeam(service.app.get(AuthRepository), service.app.get(AuthService));
  const factory = await bootstrapFactory(service, config);
  const rule = '─'.repeat(78);
  const lines = [
    '',
    rule,
    `factoryd is up: API ${service.url}/api/v1  (OpenAPI: ${service.url}/api/v1/openapi.json)`,
    `dashboard: ${service.url}/ui/  (sign in with an API key)`,
    service.databaseServer.embedded
      ? `database: embedded PostgreSQL under ${shown(service.databaseServer.location!)}` +
        (service.databaseServer.location === join(config.dataDir, 'pg')
          ? ''
          : ` (linked from ${join(config.dataDir, 'pg')}: as root, where the postgres user can reach it)`)
      : 'database: DATABASE_URL',
    'The CLI in another terminal, in this folder, finds this service by itself: npx factoryd --help',
  ];
  if (config.workerConcurrency > 0) {
    // Detected once at the workers' start (memoized): the real agents this machine can run.
    const { harnessCatalog } = await import('../../workers/worker/service-workers.js');
    lines.push('', ...(await harnessCatalog(config)).description.split('\n'));
  }
  if (factory.lines.length) lines.push('', ...factory.lines);
  // Last, where the eye lands when the banner ends.
  if (adminKey || factory.secrets.length)
    lines.push('', ...firstStartCredentials(config.dataDir, adminKey, factory.secrets));
  lines.push(rule);
  process.stdout.write(lines.join('\n') + '\n\n');
  const forget = recordLocalService(config.dataDir, {
    url: service.url,
    pid: process.pid,
    database: service.databaseServer.embedded ? 'embedded' : 'DATABASE_URL',
  });

  const shutdown = (signal: string) => {
    // A second signal while shutting down: the operator wants it gone now.
    onSignal = () => process.exit(1);
    process.stdout.write(`\n${signal}: shutting down\n`);
    forget();
    service
      .stop((stage) => process.stdout.write(`${stage}\n`))
      .then(
        () => {
          process.stdout.write('factoryd stopped\n');
          process.exit(0);
        },
        (err: unknown) => {
          process.stderr.write(`factoryd: shutdown failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
  };
  onSignal = shutdown;
}

/**
 * `factoryd serve --role notifications`: a notification dispatcher alone, on the database the API
 * processes use (DATABASE_URL). Any number of
 * them share the work (docs/notifications.md, "Delivery model"). SIGTERM or SIGINT: it stops claiming,
 * finishes and records the attempts in flight, and exits.
 */
async function serveNotifications(metricsAt: string | undefined): Promise<void> {
  const [
    { withServices },
    { Metrics },
    { listenForMetrics },
    { Database },
    { Notifications },
    { NotificationsRepository },
    { configuredDispatcher, readNotificationDepths },
    { SecretCipher },
    { SecretsService },
  ] = await Promise.all([
    import('../context.js'),
    import('../../common/metrics.js'),
    import('../../ops/metrics-listener.js'),
    import('../../database/database.js'),
    import('../../database/notifications.js'),
    import('../../notifications/notifications.repository.js'),
    import('../../notifications/dispatcher-setup.js'),
    import('../../secrets/secret-cipher.js'),
    import('../../secrets/secrets.service.js'),
  ]);
  await withServices(async (services, config) => {
    const say = (line: string) => process.stderr.write(`factoryd notifications: ${line}\n`);
    const repo = new NotificationsRepository(services.get(Database));
    // Counted only when shown: what `serve` counts of its dispatcher, and the depths it reads.
    const metrics = metricsAt === undefined ? undefined : new Metrics();
    if (metrics) readNotificationDepths(metrics, repo);
    const listener = metrics && (await listenForMetrics(metrics, metricsAt!));
    // The dispatcher `serve` builds (configuredDispatcher), on the services' cipher and secrets; it
    // tells its warnings here, in the process's own lines.
    const dispatcher = configuredDispatcher(
      repo,
      services.get(SecretCipher),
      services.get(SecretsService),
      config,
      () => new Date(),
      say,
      metrics?.countNotificationAttempt,
    );
    dispatcher.start(services.get(Notifications));
    process.stdout.write(
      `factoryd notifications: dispatcher up (pid ${process.pid})${listener ? `; metrics at ${listener.url}` : ''}\n`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGINT', () => resolve());
      process.once('SIGTERM', () => resolve());
    });
    await dispatcher.stop();
    await listener?.close();
    process.stdout.write('factoryd notifications: stopped\n');
  });
  process.exit(0);
}

/**
 * The first start's credentials: saved for the owner only (the terminal scrolls them away under the
 * request logs), and the block that shows them and says where they are. Appended, so that a file
 * kept from an earlier start (another DATABASE_URL, say) loses nothing.
 */
function firstStartCredentials(
  dataDir: string,
  adminKey: string | undefined,
  secrets: Array<{ name: string; value: string }>,
): string[] {
  const file = join(dataDir, 'first-start-credentials.txt');
  const text = [
    `# factoryd: the credentials its first start created (${new Date().toISOString()}); readable by you only.`,
    '# Another admin key at any time: npx factoryd api-keys create --team default',
    ...(adminKey ? [`FACTORYD_API_KEY=${adminKey}`] : []),
    ...(secrets.length ? ['', '# Team secrets (team default) the example factory’s webhooks name:'] : []),
    ...secrets.map((s) => `${s.name}=${s.value}`),
    '',
    '',
  ].join('\n');
  mkdirSync(dataDir, { recursive: true });
  const fd = openSync(file, 'a', 0o600);
  try {
    fchmodSync(fd, 0o600); // an existing file is narrowed before it receives anything
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  return [
    ...(adminKey
      ? [
          'First start: created team "default" and its admin API key:',
          '',
          `  export FACTORYD_API_KEY=${adminKey}`,
        ]
      : []),
    ...(secrets.length
      ? [
          '',
          'Team secrets the example factory’s webhooks name:',
          ...secrets.map((s) => `  ${s.name}: ${s.value}`),
        ]
      : []),
    '',
    `Not shown again; saved in ${shown(file)} (readable by you only).`,
    'Another key at any time: npx factoryd api-keys create --team default',
  ];
}

/** A path as the user typed it: relative to the current folder when inside it. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}
