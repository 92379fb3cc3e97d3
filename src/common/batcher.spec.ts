import { describe, expect, it } from 'vitest';
import { Batcher, type Settled } from './batcher.js';

/** A run function that records its batches and settles when the test says so. */
function recorder() {
  const batches: number[][] = [];
  const release: Array<() => void> = [];
  const run = (items: number[]) => {
    batches.push(items);
    return new Promise<Array<Settled<number>>>((resolve) =>
      release.push(() => resolve(items.map((value) => ({ status: 'fulfilled', value: value * 10 })))),
    );
  };
  return { batches, release, run };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('Batcher', () => {
  it('sends the first call at once and groups what arrives while batches are in flight', async () => {
    const r = recorder();
    const b = new Batcher(r.run, { concurrency: 1, maxItems: 100 });
    const results = [1, 2, 3, 4].map((n) => b.submit(n));
    expect(r.batches).toEqual([[1]]);
    r.release.shift()!();
    await tick();
    expect(r.batches).toEqual([[1], [2, 3, 4]]);
    r.release.shift()!();
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40]);
  });

  it('runs at most `concurrency` batches, each at most `maxItems` or `maxWeight` (one item always goes)', async () => {
    const r = recorder();
    const b = new Batcher(r.run, { concurrency: 2, maxItems: 3, maxWeight: 10, weigh: (n: number) => n });
    const results = [1, 1, 1, 1, 1, 1, 20, 2].map((n) => b.submit(n));
    expect(r.batches).toEqual([[1], [1]]);
    r.release.shift()!();
    r.release.shift()!();
    await tick();
    // The second waiting batch stops before 20: 1 + 20 would pass maxWeight.
    expect(r.batches.slice(2)).toEqual([[1, 1, 1], [1]]);
    while (r.release.length) {
      r.release.shift()!();
      await tick();
    }
    expect(r.batches.slice(4)).toEqual([[20], [2]]);
    expect(await Promise.all(results)).toEqual([10, 10, 10, 10, 10, 10, 200, 20]);
  });

  it('settles each item on its own, and fails the whole batch when the run throws', async () => {
    const failing = new Batcher<number, number>(
      async (items) =>
        items.map((n): Settled<number> =>
          n % 2 ? { status: 'rejected', reason: new Error(`odd ${n}`) } : { status: 'fulfilled', value: n },
        ),
      { concurrency: 1, maxItems: 10 },
    );
    const settled = await Promise.allSettled([1, 2, 3].map((n) => failing.submit(n)));
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'fulfilled', 'rejected']);

    const broken = new Batcher<number, number>(
      async () => {
        throw new Error('store down');
      },
      { concurrency: 1, maxItems: 10 },
    );
    const all = await Promise.allSettled([1, 2].map((n) => broken.submit(n)));
    expect(all.map((s) => (s.status === 'rejected' ? (s.reason as Error).message : 'ok'))).toEqual([
      'store down',
      'store down',
    ]);
  });
});
