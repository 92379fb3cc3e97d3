import type { INestApplicationContext, LogLevel, Type } from '@nestjs/common';
import type { TeamRef } from '../auth/auth-context.js';
import { loadConfig, type Config } from '../config/config.js';
import { cliCommand } from '../common/cli-command.js';

/**
 * Runs a command on the service's own objects: the NestJS application context of `CommandsModule`
 * (commands.module.ts), which composes the same modules `serve` does, on the service's database —
 * DATABASE_URL, or the embedded server under ./var (adopted if `factoryd serve` is running, started
 * and stopped around the command otherwise). Commands call services; they build none.
 *
 * `modules`: what the command needs beyond CommandsModule's. `logLevels`: what NestJS's logger prints (its warnings go to stdout, where they would break --json,
 * so by default only errors, which go to stderr).
 */
export async function withServices<T>(
  work: (services: INestApplicationContext, config: Config) => Promise<T>,
  opts: { config?: Config; logLevels?: LogLevel[]; modules?: Type[] } = {},
): Promise<T> {
  const config = opts.config ?? loadConfig();
  // NestJS, TypeORM and the embedded server load only for the commands that use the database.
  const [{ openDatabase }, { startDatabaseServer }, { Database }, { NestFactory }, { CommandsModule }] =
    await Promise.all([
      import('../database/data-source.js'),
      import('../database/database-server.js'),
      import('../database/database.js'),
      import('@nestjs/core'),
      import('../commands.module.js'),
    ]);
  const server = await startDatabaseServer(config);
  const ds = await openDatabase(server.url, 4);
  let services: INestApplicationContext | undefined;
  try {
    services = await NestFactory.createApplicationContext(
      CommandsModule.forRoot(config, Database.fromDataSource(ds), opts.modules),
      // abortOnError: a failing start is an error the command reports, not a process abort.
      { logger: opts.logLevels ?? ['error'], abortOnError: false },
    );
    return await work(services, config);
  } finally {
    await services?.close().catch(() => undefined);
    await ds.destroy().catch(() => undefined);
    await server.stop();
  }
}

/** The team a command's --team names (its name or uid), or an error that says where to look. */
export async function teamNamed(services: INestApplicationContext, nameOrUid: string): Promise<TeamRef> {
  const { AuthRepository } = await import('../auth/auth.repository.js');
  const team = await services.get(AuthRepository).findTeam(nameOrUid);
  if (!team) throw new Error(`no team ${nameOrUid}; see \`${cliCommand('teams list')}\``);
  return team;
}
