import { describe, expect, it } from 'vitest';
import { Backoff, retry } from './retry.js';

describe('Backoff', () => {
  it('doubles from the first pause up to the last, and starts over when reset', () => {
    const b = new Backoff({ firstMs: 100, maxMs: 2000 });
    expect([1, 2, 3, 4, 5, 6, 7].map(() => b.next())).toEqual([100, 200, 400, 800, 1600, 2000, 2000]);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it('with the first pause equal to the last, always pauses as long', () => {
    const b = new Backoff({ firstMs: 50, maxMs: 50 });
    expect([b.next(), b.next(), b.next()]).toEqual([50, 50, 50]);
  });
});

describe('retry', () => {
  const pauses = { firstMs: 1, maxMs: 2 };

  it('tries again after a failure it is told to, and returns the first success', async () => {
    const seen: Array<[string, number]> = [];
    const told: number[] = [];
    let tries = 0;
    const value = await retry(
      async () => {
        if (++tries < 3) throw new Error(`cut ${tries}`);
        return 'done';
      },
      {
        pauses,
        again: (err, attempt) => (seen.push([(err as Error).message, attempt]), true),
        onRetry: (_err, pause) => told.push(pause),
      },
    );
    expect(value).toBe('done');
    expect(seen).toEqual([
      ['cut 1', 0],
      ['cut 2', 1],
    ]);
    expect(told).toEqual([1, 2]);
  });

  it('throws the failure it is told is final, without another try', async () => {
    let tries = 0;
    await expect(
      retry(
        async () => {
          throw new Error(`refused ${++tries}`);
        },
        { pauses, again: (_err, attempt) => attempt < 2 },
      ),
    ).rejects.toThrow('refused 3');
    expect(tries).toBe(3);
  });
});
