import { describe, expect, it } from 'vitest';
import { Periodic, type Scheduler } from './periodic.js';

/** A scheduler the test fires by hand: no time passes unless the test says so. */
class ManualScheduler implements Scheduler {
  readonly pending = new Map<number, { fn: () => void; ms: number }>();
  private next = 0;
  setTimeout(fn: () => void, ms: number): unknown {
    this.pending.set(++this.next, { fn, ms });
    return this.next;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  /** The delays of the timers waiting. */
  get delays(): number[] {
    return [...this.pending.values()].map((t) => t.ms);
  }
  /** Fires every timer waiting now. */
  fire(): void {
    const due = [...this.pending];
    this.pending.clear();
    for (const [, t] of due) t.fn();
  }
}

/** A run the test ends when it wants. */
function gate() {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => ((open = resolve), (fail = reject)));
  return { promise, open, fail };
}

const settle = () => new Promise((r) => setImmediate(r));

describe('Periodic', () => {
  it('runs first after firstAfterMs, then everyMs after each run has ended', async () => {
    const scheduler = new ManualScheduler();
    let runs = 0;
    const p = new Periodic({
      everyMs: 500,
      firstAfterMs: 0,
      run: () => runs++,
      onError: () => {},
      scheduler,
    });
    expect(scheduler.delays).toEqual([]);
    p.start();
    expect(scheduler.delays).toEqual([0]);
    scheduler.fire();
    await settle();
    expect(runs).toBe(1);
    expect(scheduler.delays).toEqual([500]);
    scheduler.fire();
    await settle();
    expect(runs).toBe(2);
    await p.stop();
    expect(scheduler.delays).toEqual([]);
  });

  it('never overlaps: no next run is scheduled while one is still running', async () => {
    const scheduler = new ManualScheduler();
    const runs: Array<ReturnType<typeof gate>> = [];
    const p = new Periodic({
      everyMs: 10,
      run: () => {
        const g = gate();
        runs.push(g);
        return g.promise;
      },
      onError: () => {},
      scheduler,
    }).start();
    scheduler.fire();
    await settle();
    expect(runs).toHaveLength(1);
    expect(scheduler.delays).toEqual([]); // the run is still going: nothing else waits to start
    runs[0]!.open();
    await settle();
    expect(scheduler.delays).toEqual([10]);
    await p.stop();
  });

  it('reports a failed run (thrown or rejected) and keeps going', async () => {
    const scheduler = new ManualScheduler();
    const errors: unknown[] = [];
    let n = 0;
    const p = new Periodic({
      everyMs: 10,
      run: () => {
        n++;
        if (n === 1) throw new Error('thrown');
        return Promise.reject(new Error('rejected'));
      },
      onError: (err) => errors.push((err as Error).message),
      scheduler,
    }).start();
    scheduler.fire();
    await settle();
    scheduler.fire();
    await settle();
    expect(errors).toEqual(['thrown', 'rejected']);
    expect(scheduler.delays).toEqual([10]);
    await p.stop();
  });

  it('a failing error handler does not end the task', async () => {
    const scheduler = new ManualScheduler();
    const p = new Periodic({
      everyMs: 10,
      run: () => Promise.reject(new Error('x')),
      onError: () => {
        throw new Error('the handler failed too');
      },
      scheduler,
    }).start();
    scheduler.fire();
    await settle();
    expect(scheduler.delays).toEqual([10]);
    await p.stop();
  });

  it('stop waits for the run in progress and schedules nothing after it', async () => {
    const scheduler = new ManualScheduler();
    const g = gate();
    const p = new Periodic({ everyMs: 10, run: () => g.promise, onError: () => {}, scheduler }).start();
    scheduler.fire();
    let stopped = false;
    const stopping = p.stop().then(() => (stopped = true));
    await settle();
    expect(stopped).toBe(false);
    g.open();
    await stopping;
    expect(scheduler.delays).toEqual([]);
  });

  it('stop before the first run: it never runs', async () => {
    const scheduler = new ManualScheduler();
    let runs = 0;
    const p = new Periodic({ everyMs: 10, run: () => runs++, onError: () => {}, scheduler }).start();
    await p.stop();
    scheduler.fire();
    expect(runs).toBe(0);
    expect(scheduler.delays).toEqual([]);
  });

  it('unrefs its timer by default, so it alone does not hold the process open', async () => {
    const made: NodeJS.Timeout[] = [];
    const realSetTimeout = globalThis.setTimeout;
    const spy = ((fn: () => void, ms: number) => {
      const t = realSetTimeout(fn, ms);
      made.push(t);
      return t;
    }) as typeof setTimeout;
    globalThis.setTimeout = spy;
    let quiet: Periodic, alive: Periodic;
    try {
      quiet = new Periodic({ everyMs: 60_000, run: () => {}, onError: () => {} }).start();
      alive = new Periodic({ everyMs: 60_000, run: () => {}, onError: () => {}, keepAlive: true }).start();
    } finally {
      globalThis.setTimeout = realSetTimeout;
    }
    expect(made.map((t) => t.hasRef())).toEqual([false, true]);
    await quiet.stop();
    await alive.stop();
  });
});
