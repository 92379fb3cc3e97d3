import { DataSource } from 'typeorm';
import { MIGRATIONS } from './migrations/index.js';

export function createDataSource(url: string, poolSize = 20): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    migrations: MIGRATIONS,
    migrationsTableName: 'schema_migrations',
    migrationsTransactionMode: 'each',
    synchronize: false,
    logging: false,
    extra: { max: poolSize, application_name: 'factoryd' },
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
