import { join } from 'node:path';
import type { Command } from 'commander';
import { bootstrapDefaultTeam } from '../../auth/bootstrap.js';
import { ConfigError, loadConfig } from '../../config/config.js';
import { authOf } from './auth.commands.js';

export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description(
      'Start the API, webhook ingress, reconciler and service-hosted workers (what `npm start` runs).',
    )
    .addHelpText('after', '\nExample:\n  PORT=9000 npx factoryd serve')
    .action(serve);
}

async function serve(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`factoryd: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  // Loaded here, not at the top: every other command (an API client, say) starts without NestJS.
  const { startService } = await import('../../service.js');
  const { bootstrapFactory } = await import('../factory-bootstrap.js');
  // A signal before the service is up ends the process at once: its `exit` stops an embedded database.
  const starting = () => process.exit(1);
  process.once('SIGINT', starting).once('SIGTERM', starting);
  const service = await startService(config);
  const { repo, auth } = authOf(service.db);
  const adminKey = await bootstrapDefaultTeam(repo, auth);
  const lines = [
    '',
    `factoryd is up: API ${service.url}/api/v1  (OpenAPI: ${service.url}/api/v1/openapi.json)`,
    service.databaseServer.embedded
      ? `database: embedded PostgreSQL under ${service.databaseServer.location}` +
        (service.databaseServer.location === join(config.dataDir, 'pg')
          ? ''
          : ` (linked from ${join(config.dataDir, 'pg')}: as root, where the postgres user can reach it)`)
      : 'database: DATABASE_URL',
  ];
  if (adminKey) {
    lines.push(
      '',
      'First start: created team "default" and an admin API key (shown only this once):',
      '',
      `  ${adminKey}`,
      '',
      `Try: curl -H "Authorization: Bearer ${adminKey}" ${service.url}/api/v1/agent/runs`,
    );
  }
  lines.push('', ...(await bootstrapFactory(service, config)));
  process.stdout.write(lines.join('\n') + '\n\n');
  const shutdown = (signal: string) => {
    process.stdout.write(`\n${signal}: shutting down\n`);
    service.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`factoryd: shutdown failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.off('SIGINT', starting).off('SIGTERM', starting);
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}
