import type { Database, Queryable } from '../../src/database/database.js';

/** A node of `EXPLAIN (ANALYZE, FORMAT JSON)`'s plan, what these tests read of it. */
export interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/**
 * The statement run under EXPLAIN ANALYZE on `q` (so it runs: inside a transaction the caller rolls
 * back, see `rolledBack`), and how many rows of `relation` its scans read — returned, or read and
 * filtered out — every loop counted. What tells a statement that reads its own rows from one that
 * reads every team's (a plan's cost guesses cannot).
 */
export async function rowsRead(
  q: Queryable,
  sql: string,
  params: unknown[] | undefined,
  relation: string,
): Promise<number> {
  const [row] = await q.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
    params,
  );
  return readOf(row!['QUERY PLAN'][0].Plan, relation);
}

function readOf(node: PlanNode, relation: string): number {
  // A ModifyTable node names its table too, but reads nothing itself: its scans are below it.
  const own =
    node['Relation Name'] === relation && !('Operation' in node)
      ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
      : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + readOf(child, relation), 0);
}

/** Runs `work` in a transaction that is then rolled back, whatever it wrote. */
export async function rolledBack(db: Database, work: (tx: Queryable) => Promise<void>): Promise<void> {
  const rollback = new Error('rolled back');
  await db
    .transaction(async (tx) => {
      await work(tx);
      throw rollback;
    })
    .catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
}

/**
 * `db` with `method`'s statements that match `which` each first run under EXPLAIN ANALYZE in a
 * transaction rolled back, then for real: `read` gets the rows of `relation` each read, in order.
 */
export function explaining(
  db: Database,
  method: 'query' | 'queryLocked',
  which: RegExp,
  relation: string,
): { db: Database; read: number[] } {
  const read: number[] = [];
  const wrapped = new Proxy(db, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      if (prop !== method) return (value as (...a: unknown[]) => unknown).bind(target);
      return async (...args: unknown[]) => {
        // query(sql, params, options); queryLocked(lock, sql, params, mode)
        const [sql, params] = (method === 'query' ? args : args.slice(1)) as [string, unknown[]];
        if (which.test(sql))
          await rolledBack(target, async (tx) => {
            read.push(await rowsRead(tx, sql, params, relation));
          });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { db: wrapped, read };
}
