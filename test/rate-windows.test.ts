import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/data-source.js';
import { Database } from '../src/database/database.js';
import {
  PostgresRateWindows,
  RedisRateWindows,
  STEP_MS,
  WINDOW_MS,
  type RateWindows,
} from '../src/webhooks/rate-windows.js';
import { createTestDatabase } from './support/database.js';

/**
 * The sliding window's contract, checked against each store with times we choose (no sleeping):
 * never more than `limit` grants in any 60 s; a refusal only when `limit` grants fall within the
 * last 60 s plus one step; Retry-After is exactly when a slot frees.
 */
const REDIS = process.env.TEST_REDIS_URL;

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataSource: DataSource;
let postgres: RateWindows;
let redis: RateWindows | undefined;
beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = await openDatabase(database.url, 4);
  postgres = new PostgresRateWindows(Database.fromDataSource(dataSource));
  if (REDIS) redis = await RedisRateWindows.connect(REDIS);
});
afterAll(async () => {
  await redis?.close();
  await dataSource?.destroy();
  await database?.drop();
});

const T0 = Date.UTC(2030, 0, 1, 12, 0, 0, 250);
const fresh = () => `test:${randomBytes(8).toString('hex')}`;

/** Takes from one fresh window of 60 per minute, one call at a time. */
const minuteOf60 =
  (store: RateWindows, key: string) =>
  (at: number, wanted = 1) =>
    store.take([{ key, limit: 60, wanted }], at).then((r) => r[0]!);

function specification(store: () => RateWindows) {
  it('60 hits at t0 fill the minute: refused at t0+30 s (Retry-After 30 s), refused until t0+60 s, free at t0+60 s', async () => {
    const take = minuteOf60(store(), fresh());
    expect(await take(T0, 60)).toEqual({ granted: 60, retryAfterMs: WINDOW_MS, blocked: false });
    expect(await take(T0)).toEqual({ granted: 0, retryAfterMs: WINDOW_MS, blocked: false });
    expect(await take(T0 + 30_000)).toEqual({ granted: 0, retryAfterMs: 30_000, blocked: false });
    expect(await take(T0 + 59_999)).toEqual({ granted: 0, retryAfterMs: 1, blocked: false });
    expect((await take(T0 + 60_000, 61)).granted).toBe(60);
  });

  it('slides: what frees at t0+60 s is what came at t0, not the hits that came later', async () => {
    const take = minuteOf60(store(), fresh());
    expect((await take(T0, 30)).granted).toBe(30);
    expect((await take(T0 + 20_000, 30)).granted).toBe(30);
    expect(await take(T0 + 30_000)).toEqual({ granted: 0, retryAfterMs: 30_000, blocked: false });
    // A fixed window starting at t0 would now allow 60; the last minute still holds the 30 of t0+20 s.
    expect(await take(T0 + 61_000, 60)).toEqual({ granted: 30, retryAfterMs: 19_000, blocked: false });
    expect((await take(T0 + 80_000, 60)).granted).toBe(30);
  });

  it('looking (wanted 0) counts nothing; keys are independent; one call answers several keys', async () => {
    const [a, b] = [fresh(), fresh()];
    const taken = await store().take(
      [
        { key: a, limit: 2, wanted: 0 },
        { key: b, limit: 2, wanted: 3 },
      ],
      T0,
    );
    expect(taken).toEqual([
      { granted: 0, retryAfterMs: 0, blocked: false },
      { granted: 2, retryAfterMs: WINDOW_MS, blocked: false },
    ]);
    expect((await store().take([{ key: a, limit: 2, wanted: 2 }], T0))[0]!.granted).toBe(2);
  });

  it('unless: while that window is full nothing is taken and its Retry-After is given; otherwise it is only looked at', async () => {
    const [budget, minute] = [fresh(), fresh()];
    const take = (key: string, wanted: number, at: number, unless?: { key: string; limit: number }) =>
      store()
        .take([{ key, limit: 5, wanted, unless }], at)
        .then((r) => r[0]!);
    expect((await take(budget, 2, T0, undefined)).granted).toBe(2);
    expect(await take(minute, 3, T0 + 10_000, { key: budget, limit: 2 })).toEqual({
      granted: 0,
      retryAfterMs: 50_000,
      blocked: true,
    });
    expect(await take(minute, 3, T0 + 10_000, { key: budget, limit: 3 })).toEqual({
      granted: 3,
      retryAfterMs: 0,
      blocked: false,
    });
    // The blocked take counted nothing, and `unless` counted nothing either.
    expect((await take(minute, 5, T0 + 10_000)).granted).toBe(2);
    expect((await take(budget, 5, T0 + 10_000)).granted).toBe(3);
  });

  it('concurrent takes on one key never grant more than the limit', async () => {
    const key = fresh();
    const results = await Promise.all(
      Array.from({ length: 40 }, () => store().take([{ key, limit: 25, wanted: 1 }], T0)),
    );
    expect(results.reduce((n, [r]) => n + r!.granted, 0)).toBe(25);
  });

  it('property: ≤ limit in any 60 s, refused only when full within 60 s + one step, Retry-After exact', async () => {
    const op = fc.record({
      dt: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 10_000, max: 70_000 })),
      wanted: fc.integer({ min: 0, max: 3 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 6 }),
        fc.array(op, { minLength: 1, maxLength: 30 }),
        async (limit, ops) => {
          const key = fresh();
          const grants: Array<{ at: number; n: number }> = [];
          const inRange = (from: number, to: number) =>
            grants.filter((g) => g.at > from && g.at <= to).reduce((n, g) => n + g.n, 0);
          let now = T0;
          for (const { dt, wanted } of ops) {
            now += dt;
            const [r] = await store().take([{ key, limit, wanted }], now);
            grants.push({ at: now, n: r!.granted });
            expect(inRange(now - WINDOW_MS, now)).toBeLessThanOrEqual(limit);
            if (r!.granted < wanted) {
              expect(inRange(now - WINDOW_MS - STEP_MS, now)).toBeGreaterThanOrEqual(limit);
            }
            if (r!.retryAfterMs > 0) {
              // Still full one ms before Retry-After; a slot is free at it (looking only).
              expect(r!.retryAfterMs).toBeLessThanOrEqual(WINDOW_MS);
              const [before] = await store().take([{ key, limit, wanted: 0 }], now + r!.retryAfterMs - 1);
              const [at] = await store().take([{ key, limit, wanted: 0 }], now + r!.retryAfterMs);
              expect(before!.retryAfterMs).toBeGreaterThan(0);
              expect(at!.retryAfterMs).toBe(0);
            }
          }
        },
      ),
      { numRuns: 25 },
    );
  });
}

describe('PostgreSQL store (UNLOGGED rate_limits, rate_limit_take)', () => specification(() => postgres));

describe.skipIf(!REDIS)('Redis store (runs when TEST_REDIS_URL is set, e.g. redis://127.0.0.1:6379)', () =>
  specification(() => redis!),
);
