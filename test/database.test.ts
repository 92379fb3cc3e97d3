import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/data-source.js';
import { Database } from '../src/database/database.js';
import { createTestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';

// Statements with parameters run as named prepared statements (parsed and planned once per
// connection): they must behave exactly as one-off statements do, errors and transactions included.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataSource: DataSource;
let db: Database;
beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = await openDatabase(database.url, 3);
  db = Database.fromDataSource(dataSource);
  await db.execute(`CREATE TABLE prepared_probe (k text PRIMARY KEY, v integer NOT NULL)`);
});
afterAll(async () => {
  await dataSource?.destroy();
  await database?.drop();
});

describe('prepared statements', () => {
  it('runs the same statement on every connection of the pool, with any values', async () => {
    const insert = `INSERT INTO prepared_probe (k, v) VALUES ($1, $2)`;
    await Promise.all(Array.from({ length: 30 }, (_, i) => db.execute(insert, [`k${i}`, i])));
    const rows = await db.query<{ n: number; total: number }>(
      `SELECT count(*)::int AS n, sum(v)::int AS total FROM prepared_probe WHERE k LIKE $1`,
      ['k%'],
    );
    expect(rows).toEqual([{ n: 30, total: 435 }]);
  });

  it('still runs a statement that first failed, or was first sent in a transaction that failed', async () => {
    const insert = `INSERT INTO prepared_probe (k, v) VALUES ($1, $2) RETURNING v`;
    await db.execute(insert, ['dup', 1]);
    await expect(db.execute(insert, ['dup', 2])).rejects.toThrow(/duplicate key/);
    expect(await db.query(insert, ['dup-2', 2])).toEqual([{ v: 2 }]);

    // Never sent before, and first sent inside an aborted transaction: its parse fails there.
    const fresh = `SELECT v + $2::int AS w FROM prepared_probe WHERE k = $1`;
    await expect(
      db.transaction(async (tx) => {
        await tx.execute(insert, ['dup', 3]).catch(() => undefined); // aborts the transaction
        await tx.query(fresh, ['dup', 1]);
      }),
    ).rejects.toThrow(/current transaction is aborted/);
    for (let i = 0; i < 6; i++) expect(await db.query(fresh, ['dup', i])).toEqual([{ w: 1 + i }]);
  });

  it('runs statements built at run time past the number it keeps prepared', async () => {
    for (let i = 0; i < 1100; i++) {
      const [row] = await db.query<{ n: number }>(`SELECT $1::int + ${i} AS n`, [1]);
      expect(row!.n).toBe(i + 1);
    }
  });
});

describe('afterCommit', () => {
  const seen = (k: string) =>
    // Another connection: what other processes see.
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM prepared_probe WHERE k = $1`, [k]);

  it('runs at once outside a transaction, after the COMMIT inside one, never on a rollback', async () => {
    const calls: string[] = [];
    await db.execute(`INSERT INTO prepared_probe (k, v) VALUES ($1, 1)`, ['ac-1']);
    db.afterCommit(() => calls.push('outside'));
    expect(calls).toEqual(['outside']);

    const visibleThen: number[] = [];
    await db.transaction(async (tx) => {
      await tx.execute(`INSERT INTO prepared_probe (k, v) VALUES ($1, 1)`, ['ac-2']);
      tx.afterCommit(() => {
        calls.push('inside');
        void seen('ac-2').then(([r]) => visibleThen.push(r!.n));
      });
      expect(calls).toEqual(['outside']); // not yet: the transaction is open
    });
    expect(calls).toEqual(['outside', 'inside']);
    await eventually(() => visibleThen.length, 'the after-commit read');
    expect(visibleThen).toEqual([1]);

    await expect(
      db.transaction(async (tx) => {
        await tx.execute(`INSERT INTO prepared_probe (k, v) VALUES ($1, 1)`, ['ac-3']);
        tx.afterCommit(() => calls.push('rolled back'));
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(calls).toEqual(['outside', 'inside']);
    expect(await seen('ac-3')).toEqual([{ n: 0 }]);
  });
});

describe('queryLocked', () => {
  it('pipelines its three statements instead of queueing them on a busy client (which pg deprecates)', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      expect(await db.queryLocked<{ v: number }>(424_243, `SELECT $1::int AS v`, [7])).toEqual([{ v: 7 }]);
      // pg warns on the next tick after a query is queued behind another.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.map((w) => w.message)).toEqual([]);
    // The connection left pipeline mode: a plain transaction on it behaves as before.
    expect(await db.transaction((tx) => tx.query<{ n: number }>(`SELECT 1 AS n`))).toEqual([{ n: 1 }]);
  });

  it('waits for the lock, then sees what its previous holder committed; a failure leaves the connection clean', async () => {
    const LOCK = 424_242;
    const holder = await db.pool.connect();
    try {
      await holder.query(`BEGIN`);
      await holder.query(`SELECT pg_advisory_xact_lock(${LOCK})`);
      await holder.query(`INSERT INTO prepared_probe (k, v) VALUES ('locked-1', 1)`);
      const counted = db.queryLocked<{ n: number }>(
        LOCK,
        `SELECT count(*)::int AS n FROM prepared_probe WHERE k LIKE $1`,
        ['locked-%'],
      );
      // It is waiting for the lock (its snapshot not yet taken) when the holder commits.
      await eventually(
        async () =>
          (
            await db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`,
              [LOCK],
            )
          )[0].n === 1,
        'queryLocked to wait for the lock',
      );
      await holder.query(`COMMIT`);
      expect(await counted).toEqual([{ n: 1 }]);
    } finally {
      holder.release();
    }
    await expect(db.queryLocked(LOCK, `SELECT 1 / $1::int`, [0])).rejects.toThrow(/division by zero/);
    // Every connection of the pool (3) is clean afterwards: not left in an aborted transaction.
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => db.queryLocked<{ v: number }>(LOCK, `SELECT $1::int AS v`, [i])),
    );
    expect(results.map((r) => r[0].v)).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
