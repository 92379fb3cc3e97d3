import pg from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations/index.js';

/**
 * Every connection of the pool, with an `error` listener for its whole life. node-postgres emits
 * `error` on a client whose backend is terminated (57P01: pg_terminate_backend, a failover, a server
 * restart) when no query of it is running, and an emitter without a listener ends the process. The
 * pool listens to its idle clients and Database.checkout to the ones it lends, but TypeORM lends its
 * own (migrations, showMigrations for the readiness probe) with none. Nothing is lost by ignoring the
 * event here: the client's queries fail with the error, and the pool discards a client that is no
 * longer queryable when it comes back.
 */
class ListenedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    // Each connection's own limit (not the pool's, which would also bound the wait for a free client).
    super(
      typeof config === 'string'
        ? { connectionString: config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS }
        : { ...config, connectionTimeoutMillis: CONNECT_TIMEOUT_MS },
    );
    this.on('error', () => undefined);
  }
}

/**
 * How long one connection may take to be ready for queries: a server that accepts and never answers
 * (a wrong port, a stuck proxy, a paused VM) must not hang the start without a word.
 */
export const CONNECT_TIMEOUT_MS = 10_000;

function createDataSource(url: string, poolSize = 20): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    migrations: MIGRATIONS,
    migrationsTableName: 'schema_migrations',
    migrationsTransactionMode: 'each',
    synchronize: false,
    logging: false,
    extra: { max: poolSize, application_name: 'factoryd', Client: ListenedClient },
  });
}

/** Connects and applies pending migrations; returns the initialised data source. */
export async function openDatabase(url: string, poolSize?: number): Promise<DataSource> {
  const ds = createDataSource(url, poolSize);
  try {
    await ds.initialize();
  } catch (err) {
    throw new Error(
      `cannot connect to PostgreSQL at ${whereIs(url)} (DATABASE_URL): ${err instanceof Error ? err.message : String(err)}; check that the server runs there and answers (the limit is ${CONNECT_TIMEOUT_MS / 1000} s a connection)`,
      { cause: err },
    );
  }
  await ds.runMigrations();
  return ds;
}

/** The server and database of a connection URL, never its user or password. */
function whereIs(url: string): string {
  try {
    const u = new URL(url);
    return `${u.host || 'localhost'}${u.pathname}`;
  } catch {
    return 'the configured address';
  }
}
