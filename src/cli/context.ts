import { loadConfig, type Config } from '../config/config.js';
import type { Database } from '../database/database.js';

/**
 * Runs a command against the service's database: DATABASE_URL, or the embedded server under ./var
 * (adopted if `factoryd serve` is running, started and stopped around the command otherwise).
 */
export async function withDatabase<T>(work: (db: Database, config: Config) => Promise<T>): Promise<T> {
  const config = loadConfig();
  // TypeORM and the embedded server load only for the commands that use the database.
  const [{ openDatabase }, { startDatabaseServer }, { Database }] = await Promise.all([
    import('../database/data-source.js'),
    import('../database/database-server.js'),
    import('../database/database.js'),
  ]);
  const server = await startDatabaseServer(config);
  const ds = await openDatabase(server.url, 4);
  try {
    return await work(Database.fromDataSource(ds), config);
  } finally {
    await ds.destroy().catch(() => undefined);
    await server.stop();
  }
}
