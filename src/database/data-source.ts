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
    super(config);
    this.on('error', () => undefined);
  }
}

export function createDataSource(url: string, poolSize = 20): DataSource {
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
  await ds.initialize();
  await ds.runMigrations();
  return ds;
}

export async function pendingMigrations(ds: DataSource): Promise<boolean> {
  return ds.showMigrations();
}
