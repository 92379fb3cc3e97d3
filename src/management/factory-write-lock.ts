import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';

/**
 * One management write per factory at a time: queued in this process, then a PostgreSQL session
 * advisory lock for replicas that share the managed repositories. Only the head of the local queue
 * waits on the database, so a burst of writes holds one pooled connection per factory.
 */
@Injectable()
export class FactoryWriteLock {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(@Inject(Database) private readonly db: Database) {}

  async run<T>(factoryId: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(factoryId) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.tails.set(factoryId, tail);
    await before;
    const key = `factoryd:manage:${factoryId}`;
    const { client, release } = await this.db.checkout().catch((err: unknown) => {
      done();
      throw err;
    });
    let broken: Error | undefined;
    try {
      await client.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [key]);
      try {
        return await work();
      } finally {
        // A connection whose unlock failed is closed, which releases the lock with the session.
        await client
          .query(`SELECT pg_advisory_unlock(hashtextextended($1, 0))`, [key])
          .catch((err: Error) => (broken = err));
      }
    } finally {
      release(broken);
      done();
      if (this.tails.get(factoryId) === tail) this.tails.delete(factoryId);
    }
  }
}
