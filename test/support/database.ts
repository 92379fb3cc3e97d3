import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { openDatabase } from '../../src/database/data-source.js';
import { Database } from '../../src/database/database.js';

/** A fresh, empty database on the test server; drop() removes it. */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = inject('adminDatabaseUrl');
  const name = `factoryd_t_${randomBytes(6).toString('hex')}`;
  await withClient(admin, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () =>
      withClient(admin, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function withClient<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * Runs `work` on a Database of one pooled connection and returns the statements that connection kept
 * prepared (pg_prepared_statements is per connection: with one, it lists all of work's).
 */
export async function statementsPreparedBy(
  url: string,
  work: (db: Database) => Promise<unknown>,
): Promise<string[]> {
  const dataSource = await openDatabase(url, 1);
  try {
    const db = Database.fromDataSource(dataSource);
    await work(db);
    return (await db.query<{ statement: string }>(`SELECT statement FROM pg_prepared_statements`)).map(
      (r) => r.statement,
    );
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Runs `work` while another connection holds `table` in ACCESS EXCLUSIVE mode: every statement that
 * reads it waits meanwhile, as long as one that walks millions of rows would, and ends the same way.
 */
export async function whileLocked<T>(url: string, table: string, work: () => Promise<T>): Promise<T> {
  return withClient(url, async (c) => {
    await c.query('BEGIN');
    try {
      await c.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      return await work();
    } finally {
      await c.query('ROLLBACK');
    }
  });
}
