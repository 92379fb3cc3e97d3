import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { isDatabaseUnreachable, ServiceUnavailable } from '../common/problem.js';
import { retry } from '../common/retry.js';

/** What a repository needs to run SQL: the pool, or a transaction's client. */
export interface Queryable {
  /** The result rows. */
  query<T = Record<string, any>>(sql: string, params?: unknown[], options?: QueryOptions): Promise<T[]>;
  /** The number of rows the statement affected. */
  execute(sql: string, params?: unknown[]): Promise<number>;
  /**
   * Runs `fn` once what was written through this is committed: at once outside a transaction (each
   * statement commits as it completes), after COMMIT inside one, and never if it rolls back. For
   * signals to other processes, which must not arrive before the data they announce is visible.
   */
  afterCommit(fn: () => void): void;
}

export interface QueryOptions {
  /**
   * Plan the statement for its parameters' values on every call (an unnamed statement) instead of
   * preparing it once per connection. For a statement whose good plan depends on the values: after
   * five calls a prepared one may settle on PostgreSQL's generic plan, one plan for every value, and
   * for a rare value that plan can walk a whole team's runs (a runs list with `q` that matches
   * nothing took 20 s at 10M runs against 0.3 ms planned for its value: docs/run-api.md).
   */
  planEachTime?: boolean;
}

/**
 * A piece of a statement (CTEs) that a caller composes with others into one statement, so that one
 * round trip does what several would: its SQL and its parameters, numbered from the `first` the
 * builder was given.
 */
export interface StatementPart {
  ctes: string;
  params: unknown[];
}

/** Placeholders for a part whose parameters start at `$first`: `ref(1)` is `$first`. */
export const paramRefs =
  (first: number) =>
  (n: number): string =>
    `$${first + n - 1}`;

/** SQLSTATE query_canceled: a statement stopped by its statement_timeout. */
const QUERY_CANCELED = '57014';

/** Names of prepared statements by SQL text (bounded: texts built at run time must not grow it forever). */
const statementNames = new Map<string, string>();
const MAX_PREPARED = 1000;

/**
 * A statement with parameters runs as a named prepared statement: PostgreSQL parses and plans it once
 * per connection instead of on every call (the planning alone cost as much as the execution of the
 * workers' and the ingress's statements). Without parameters it may be several statements, so it runs
 * as a simple query. With `planEachTime` it runs unnamed, planned for its values (QueryOptions).
 */
function statement(sql: string, params?: unknown[], options?: QueryOptions): string | pg.QueryConfig {
  if (!params) return sql;
  if (options?.planEachTime) return { text: sql, values: params };
  let name = statementNames.get(sql);
  if (!name) {
    if (statementNames.size >= MAX_PREPARED) return { text: sql, values: params };
    name = `s${createHash('sha1').update(sql).digest('base64url').slice(0, 20)}`;
    statementNames.set(sql, name);
  }
  return { name, text: sql, values: params };
}

class ClientQueries implements Queryable {
  constructor(
    protected readonly target: pg.Pool | pg.PoolClient,
    /** Inside a transaction: what to run after its COMMIT. */
    readonly commitHooks?: Array<() => void>,
  ) {}

  async query<T = Record<string, any>>(
    sql: string,
    params?: unknown[],
    options?: QueryOptions,
  ): Promise<T[]> {
    return (await this.target.query(statement(sql, params, options))).rows as T[];
  }

  async execute(sql: string, params?: unknown[]): Promise<number> {
    return (await this.target.query(statement(sql, params))).rowCount ?? 0;
  }

  afterCommit(fn: () => void): void {
    if (this.commitHooks) this.commitHooks.push(fn);
    else fn();
  }
}

/**
 * The service's PostgreSQL. TypeORM owns the connection pool and the migrations; repositories write
 * plain SQL through this class, straight on the pool (no per-query ORM overhead on hot paths).
 */
export class Database extends ClientQueries {
  constructor(
    readonly pool: pg.Pool,
    readonly dataSource: DataSource,
  ) {
    super(pool);
  }

  static fromDataSource(ds: DataSource): Database {
    const pool = (ds.driver as unknown as { master: pg.Pool }).master;
    return new Database(pool, ds);
  }

  /**
   * A connection of the pool for a caller's own use, with an `error` listener for as long as it is
   * checked out: node-postgres emits `error` on a client whose backend is terminated or whose server
   * goes away, and an emitter without a listener ends the process. The caller's pending query fails
   * with the error instead; `release` destroys a connection that failed, so the pool replaces it.
   */
  async checkout(): Promise<CheckedOut> {
    const client = await this.pool.connect();
    let lost: Error | undefined;
    const onError = (err: Error) => (lost ??= err);
    client.on('error', onError);
    return {
      client,
      release: (failed?: Error) => {
        client.off('error', onError);
        client.release(lost ?? failed);
      },
    };
  }

  /**
   * One statement in a transaction that first takes an advisory lock: the statement's snapshot is
   * taken once the lock is held, so it sees everything committed by the lock's previous holder.
   * `shared`: the lock is taken in shared mode — holders of it run side by side, and all wait for
   * (and exclude) one that takes it exclusively.
   */
  queryLocked<T = Record<string, any>>(
    lock: number,
    sql: string,
    params: unknown[],
    mode: 'exclusive' | 'shared' = 'exclusive',
  ): Promise<T[]> {
    const take = mode === 'shared' ? 'pg_advisory_xact_lock_shared' : 'pg_advisory_xact_lock';
    return this.pipelined(`BEGIN; SELECT ${take}(${Math.trunc(lock)})`, sql, params);
  }

  /**
   * One statement that PostgreSQL stops once it has run `limit.ms` (waiting for a lock included): for
   * a read whose cost the caller's input decides, so that no request holds a connection and a core
   * for longer than that (a runs list sorted by a key no index keeps walked all 10M runs of a team:
   * 4 s). Stopped, it fails as a 503 with Retry-After whose detail is `limit.tooLong`.
   */
  async queryWithin<T = Record<string, any>>(
    limit: { ms: number; tooLong: string },
    sql: string,
    params: unknown[],
    options?: QueryOptions,
  ): Promise<T[]> {
    try {
      return await this.pipelined<T>(
        `BEGIN; SET LOCAL statement_timeout = ${Math.trunc(limit.ms)}`,
        sql,
        params,
        options,
      );
    } catch (err) {
      if ((err as { code?: unknown }).code === QUERY_CANCELED) throw new ServiceUnavailable(limit.tooLong);
      throw err;
    }
  }

  /**
   * `begin` (which opens a transaction), the statement and COMMIT go out pipelined, in one write: one
   * round trip, and no turn of the event loop between them (a busy worker's loop made them cost more
   * than the statement). PostgreSQL still runs them in order, and a failed statement's Sync ends its
   * error, so COMMIT then rolls back. Pipeline mode is on for these three only: queued on a client
   * that is not pipelining, pg would send each after the last one's answer, a queue it deprecates
   * (pg 9 removes it).
   */
  private async pipelined<T>(
    begin: string,
    sql: string,
    params: unknown[],
    options?: QueryOptions,
  ): Promise<T[]> {
    const { client, release } = await this.checkout();
    const pipelining = client as unknown as { pipeline: boolean };
    let failed: Error | undefined;
    try {
      pipelining.pipeline = true;
      const opened = client.query(begin);
      const result = client.query(statement(sql, params, options));
      // After a failure COMMIT ends the transaction as a ROLLBACK: the connection goes back clean.
      const commit = client.query('COMMIT');
      // Every statement settles before the connection goes back (and leaves pipeline mode): released
      // on the first failure, the later ones would still be running on a client someone else holds.
      const settled = await Promise.allSettled([opened, result, commit]);
      const refused = settled.find((s) => s.status === 'rejected');
      if (refused) throw refused.reason;
      return (settled[1] as PromiseFulfilledResult<pg.QueryResult>).value.rows as T[];
    } catch (err) {
      failed = err as Error;
      throw err;
    } finally {
      pipelining.pipeline = false;
      // A failed statement leaves the connection clean (COMMIT rolled back); a lost one is destroyed.
      release(isDatabaseUnreachable(failed) ? failed : undefined);
    }
  }

  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  async transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkout();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const tx = new ClientQueries(client, []);
      const result = await work(tx);
      await client.query('COMMIT');
      for (const fn of tx.commitHooks!) fn();
      return result;
    } catch (err) {
      // A connection that cannot roll back is not given to anyone else.
      await client.query('ROLLBACK').catch((rollback: Error) => (broken = rollback));
      throw err;
    } finally {
      release(broken);
    }
  }
}

/** A pooled connection checked out by `Database.checkout`. */
export interface CheckedOut {
  client: pg.PoolClient;
  /** Back to the pool, or destroyed when it failed (`failed`, or an `error` it emitted meanwhile). */
  release(failed?: Error): void;
}

/** Tries of `retryWhileUnreachable` after the first, 100 ms to 2 s apart: about 7 s in all. */
const UNREACHABLE_RETRIES = 7;

/**
 * Runs `work` again while it fails because the database is out of reach (a connection cut, a server
 * restarting), after a growing pause; any other error, or the last one, is thrown. For work that
 * must not give up at the first cut because what it completes has already taken effect.
 */
export async function retryWhileUnreachable<T>(work: () => Promise<T>): Promise<T> {
  return retry(work, {
    pauses: { firstMs: 100, maxMs: 2000 },
    again: (err, attempt) => attempt < UNREACHABLE_RETRIES && isDatabaseUnreachable(err),
  });
}
