import pg from 'pg';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

export interface DatabaseServer {
  url: string;
  embedded: boolean;
  /** The embedded cluster's folder (a link under DATA_DIR resolved): where its data is. */
  location?: string;
  stop(): Promise<void>;
}

export interface DatabaseServerLog {
  /** The embedded server's own output. */
  log?: (line: string) => void;
  /** Its supervisor's events: an unexpected exit, a restart. */
  notice?: (message: string) => void;
}

/** `DATABASE_URL` when set; otherwise the embedded server under `${dataDir}/pg`, database `factoryd`. */
export async function startDatabaseServer(
  config: Config,
  logs: DatabaseServerLog = {},
): Promise<DatabaseServer> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: false, stop: async () => undefined };
  const server = new EmbeddedPostgres({ dir: join(config.dataDir, 'pg'), ...logs });
  await server.start();
  try {
    await ensureDatabase(server.url('postgres'), 'factoryd');
  } catch (err) {
    await server.stop();
    throw err;
  }
  return {
    url: server.url('factoryd'),
    embedded: true,
    location: server.location,
    stop: () => server.stop(),
  };
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  // A connection cut now fails the pending query; without a listener it would end the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}
