import pg from 'pg';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

export interface DatabaseServer {
  url: string;
  embedded: boolean;
  stop(): Promise<void>;
}

/** `DATABASE_URL` when set; otherwise the embedded server under `${dataDir}/pg`, database `factoryd`. */
export async function startDatabaseServer(
  config: Config,
  log?: (line: string) => void,
): Promise<DatabaseServer> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, stop: async () => undefined };
  const server = new EmbeddedPostgres({ dir: join(config.dataDir, 'pg'), log });
  await server.start();
  await ensureDatabase(server.url('postgres'), 'factoryd');
  return { url: server.url('factoryd'), embedded: true, stop: () => server.stop() };
}

export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}
