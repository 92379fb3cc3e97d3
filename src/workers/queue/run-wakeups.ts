import { EventEmitter } from 'node:events';
import { CHANNELS } from '../../database/channels.js';
import type { Notifications } from '../../database/notifications.js';

/**
 * The process's wake-ups for workers, from its single listener (Notifications): emits `queued` when
 * runs were queued, `control` (run id) for follow-ups and cancels, and `resync` after the listener
 * was cut off (a `queued` too: runs queued meanwhile are claimed now, not at the next poll).
 */
export class RunWakeups extends EventEmitter {
  /** Closed (the process is stopping): waits end at once, so long polls answer and let HTTP close. */
  closed = false;
  /** Counts `queued` signals, so a waiter can tell whether one came since it last looked. */
  generation = 0;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(private readonly notifications: Notifications) {
    super();
    this.setMaxListeners(0);
  }

  /** Subscribes (the listener connects on its own; errors never reach here). */
  start(): void {
    if (this.closed || this.unsubscribe.length) return;
    this.unsubscribe.push(
      this.notifications.subscribe(CHANNELS.runsQueued, {
        notified: () => this.queued(),
        resync: () => this.queued(),
      }),
      this.notifications.subscribe(CHANNELS.runControl, {
        notified: ({ run_id }) => {
          this.emit('control', run_id);
          this.queued(); // a follow-up may have queued an ended run again
        },
        resync: () => this.emit('resync'),
      }),
    );
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

  close(): Promise<void> {
    this.closed = true;
    for (const off of this.unsubscribe.splice(0)) off();
    this.emit('queued');
    return Promise.resolve();
  }
}
