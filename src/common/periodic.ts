/** What waits between runs; tests hand in one they fire themselves, so nothing sleeps. */
export interface Scheduler {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Node's timers; unref'd unless `keepAlive`, so a periodic task alone never holds the process open. */
const nodeScheduler = (keepAlive: boolean): Scheduler => ({
  setTimeout: (fn, ms) => {
    const timer = setTimeout(fn, ms);
    if (!keepAlive) timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
});

export interface PeriodicOptions {
  /** Pause between the end of one run and the start of the next. */
  everyMs: number;
  /** Pause before the first run (default `everyMs`; 0 runs it on the next turn of the event loop). */
  firstAfterMs?: number;
  run: () => unknown;
  /** A failed run is reported here and the next one is scheduled as usual. */
  onError: (err: unknown) => void;
  /** The process stays alive while the task runs (a worker's heartbeat); default false. */
  keepAlive?: boolean;
  scheduler?: Scheduler;
}

/**
 * A task run every `everyMs`: the next run is scheduled when the previous one has ended, so runs
 * never overlap however long one takes; errors go to `onError`, never up; `stop` cancels the next
 * run and resolves once a run in progress has ended.
 */
export class Periodic {
  private readonly scheduler: Scheduler;
  private timer?: unknown;
  private current?: Promise<void>;
  private stopped = true;

  constructor(private readonly opts: PeriodicOptions) {
    this.scheduler = opts.scheduler ?? nodeScheduler(opts.keepAlive ?? false);
  }

  start(): this {
    if (!this.stopped) return this;
    this.stopped = false;
    this.schedule(this.opts.firstAfterMs ?? this.opts.everyMs);
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) this.scheduler.clearTimeout(this.timer);
    this.timer = undefined;
    await this.current;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = this.scheduler.setTimeout(() => {
      this.timer = undefined;
      this.current = this.runOnce().finally(() => {
        this.current = undefined;
        this.schedule(this.opts.everyMs);
      });
    }, ms);
  }

  private async runOnce(): Promise<void> {
    try {
      await this.opts.run();
    } catch (err) {
      try {
        this.opts.onError(err);
      } catch {
        // A failing error handler must not end the task.
      }
    }
  }
}

/** Starts `opts.run` every `opts.everyMs`; see Periodic. */
export const startPeriodic = (opts: PeriodicOptions): Periodic => new Periodic(opts).start();
