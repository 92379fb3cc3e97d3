import { EventEmitter } from 'node:events';
import type pg from 'pg';
import type { Database } from '../database/database.js';
import { RUN_CONTROL_CHANNEL, RUNS_QUEUED_CHANNEL } from '../runs/runs-signal.js';

/**
 * One LISTEN connection per process: emits `queued` when runs were queued and `control` (run id)
 * for follow-ups and cancels. Reconnects when the connection drops.
 */
export class RunWakeups extends EventEmitter {
  private client?: pg.PoolClient;
  /** Closed (the process is stopping): waits end at once, so long polls answer and let HTTP close. */
  closed = false;
  private retry?: NodeJS.Timeout;
  /** Counts `queued` signals, so a waiter can tell whether one came since it last looked. */
  generation = 0;

  constructor(private readonly db: Database) {
    super();
    this.setMaxListeners(0);
  }

  async start(): Promise<void> {
    if (this.closed) return;
    try {
      const client = await this.db.pool.connect();
      this.client = client;
      client.on('notification', (n) => {
        if (n.channel === RUNS_QUEUED_CHANNEL) this.queued();
        else if (n.channel === RUN_CONTROL_CHANNEL && n.payload) {
          try {
            const p = JSON.parse(n.payload) as { run_id: string };
            this.emit('control', p.run_id);
            this.queued(); // a follow-up may have queued an ended run again
          } catch {
            /* not ours */
          }
        }
      });
      client.on('error', () => this.reconnect());
      await client.query(`LISTEN ${RUNS_QUEUED_CHANNEL}`);
      await client.query(`LISTEN ${RUN_CONTROL_CHANNEL}`);
    } catch {
      this.reconnect();
    }
  }

  private queued(): void {
    this.generation++;
    this.emit('queued');
  }

  /**
   * Resolves on the next `queued` (at once if one came after `since`, a `generation`), after `ms`, or
   * when `cut` aborts.
   */
  next(ms: number, since = this.generation, cut?: AbortSignal): Promise<void> {
    if (this.generation !== since || this.closed || cut?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off('queued', done);
        cut?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.once('queued', done);
      cut?.addEventListener('abort', done, { once: true });
    });
  }

  private reconnect(): void {
    this.client?.release(true);
    this.client = undefined;
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.start();
    }, 1000);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    if (this.client) {
      await this.client.query(`UNLISTEN *`).catch(() => undefined);
      this.client.release();
      this.client = undefined;
    }
    this.emit('queued');
  }
}
