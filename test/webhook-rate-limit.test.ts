import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../src/common/clock.js';
import {
  createFactory,
  createWebhook,
  deliver,
  deliveriesOf,
  type FactoryFixture,
  type WebhookFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * docs/webhooks.md: more than 60 authenticated deliveries to a webhook in the last minute → 429 with
 * Retry-After (whole seconds, 1–60); a sliding minute that counts every request that passed
 * authentication, whatever its outcome; shared by every replica. Run against the PostgreSQL store,
 * and against Redis when TEST_REDIS_URL is set.
 */
const REDIS = process.env.TEST_REDIS_URL;
/** Replicas share the secrets key, as they must in production. */
const SECRETS_KEY = randomBytes(32).toString('base64');

/** The service's Clock, set by the test: ingress admissions read it, so the minute passes at will. */
function clockOf(t: TestService) {
  let now = Date.now();
  t.service.app.get(Clock).now = () => new Date(now);
  return { at: (ms: number) => (now = ms) };
}

const post = (t: TestService, hook: WebhookFixture, body: string, secret = hook.secret) =>
  deliver(t.url, `/webhooks/w/${hook.uid}`, body, { authorization: `Bearer ${secret}` });
const statuses = (results: Array<{ status: number }>) => results.map((r) => r.status).sort();

describe.each([
  { store: 'PostgreSQL', env: {} as Record<string, string>, skip: false },
  {
    store: 'Redis (runs when TEST_REDIS_URL is set, e.g. redis://127.0.0.1:6379)',
    env: { REDIS_URL: REDIS ?? '' },
    skip: !REDIS,
  },
])('rate limit, $store store', ({ env, skip }) => {
  let a: TestService;
  let b: TestService;
  let factory: FactoryFixture;
  beforeAll(async () => {
    if (skip) return;
    a = await startTestService({ ...env, SECRETS_KEY });
    b = await startTestService({ ...env, SECRETS_KEY }, { sameDatabaseAs: a });
    factory = await createFactory(a);
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
  });

  it.skipIf(skip)(
    'the minute slides: 60 at t0; at t0+30 s still 429 (Retry-After 30); at t0+60 s accepted again',
    async () => {
      const hook = await createWebhook(a, factory);
      const clock = clockOf(a);
      const t0 = Math.floor(Date.now() / 1000) * 1000 + 500;
      clock.at(t0);
      const first = await Promise.all(Array.from({ length: 60 }, (_, i) => post(a, hook, `{"i":${i}}`)));
      expect(statuses(first)).toEqual(Array(60).fill(202));

      const retryAfter = async (at: number) => {
        clock.at(at);
        const res = await post(a, hook, `{"at":${at}}`);
        expect(res.status).toBe(429);
        expect(res.body).toMatchObject({ status: 429, error: 'rate_limited', retryable: true });
        return res.headers.get('retry-after');
      };
      expect(await retryAfter(t0)).toBe('60');
      expect(await retryAfter(t0 + 30_000)).toBe('30');
      expect(await retryAfter(t0 + 59_001)).toBe('1');
      clock.at(t0 + 60_000);
      expect((await post(a, hook, '{"again":1}')).status).toBe(202);
      const log = await deliveriesOf(a.service.db, hook.id);
      expect(log.length).toBe(61);
      expect(log.every((e) => e.status === 'accepted')).toBe(true);
    },
  );

  it.skipIf(skip)(
    'what frees is what is a minute old: 30 at t0 and 30 at t0+20 s → 30 more at t0+61 s, then Retry-After 19',
    async () => {
      const hook = await createWebhook(a, factory);
      const clock = clockOf(a);
      const t0 = Date.now();
      const burst = (n: number, tag: string) =>
        Promise.all(Array.from({ length: n }, (_, i) => post(a, hook, `{"${tag}":${i}}`)));
      clock.at(t0);
      expect(statuses(await burst(30, 'x'))).toEqual(Array(30).fill(202));
      clock.at(t0 + 20_000);
      expect(statuses(await burst(30, 'y'))).toEqual(Array(30).fill(202));
      clock.at(t0 + 61_000);
      const third = await burst(31, 'z');
      expect(statuses(third)).toEqual([...Array(30).fill(202), 429]);
      expect(third.find((r) => r.status === 429)!.headers.get('retry-after')).toBe('19');
    },
  );

  it.skipIf(skip)(
    'counts every authenticated request whatever its outcome; failed auth and 413 do not count',
    async () => {
      const hook = await createWebhook(a, factory);
      clockOf(a);
      const invalid = await Promise.all(Array.from({ length: 20 }, () => post(a, hook, 'not json')));
      expect(statuses(invalid)).toEqual(Array(20).fill(400));
      const same = await Promise.all(Array.from({ length: 20 }, () => post(a, hook, '{"same":true}')));
      expect(statuses(same)).toEqual(Array(20).fill(202));
      const wrong = await Promise.all(Array.from({ length: 10 }, () => post(a, hook, '{}', 'wrong-secret')));
      expect(statuses(wrong)).toEqual(Array(10).fill(401));
      const big = await post(a, hook, JSON.stringify({ p: 'x'.repeat(262_144) }));
      expect(big.status).toBe(413);
      const rest = await Promise.all(Array.from({ length: 21 }, (_, i) => post(a, hook, `{"n":${i}}`)));
      expect(statuses(rest)).toEqual([...Array(20).fill(202), 429]);
      const log = await deliveriesOf(a.service.db, hook.id);
      const count = (s: string) => log.filter((e) => e.status === s).length;
      expect([count('rejected_invalid_json'), count('accepted'), count('duplicate')]).toEqual([20, 21, 19]);
      expect([count('rejected_auth'), count('rejected_too_large')]).toEqual([10, 1]);
    },
  );

  it.skipIf(skip)(
    'two replicas share the minute: 240 deliveries spread over both → exactly 60 accepted',
    async () => {
      const hook = await createWebhook(a, factory);
      const results = await Promise.all(
        Array.from({ length: 240 }, (_, i) => post(i % 2 ? b : a, hook, `{"i":${i}}`)),
      );
      expect(results.filter((r) => r.status === 202).length).toBe(60);
      expect(results.filter((r) => r.status === 429).length).toBe(180);
      for (const r of results.filter((x) => x.status === 429)) {
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      }
      expect((await deliveriesOf(a.service.db, hook.id)).length).toBe(60);
    },
  );

  it.skipIf(skip)(
    'two replicas share the failed-auth budget of (webhook, address): 10 + 10 failures, then 429 on either',
    async () => {
      const hook = await createWebhook(a, factory);
      for (const t of [a, b]) {
        for (let i = 0; i < 10; i++) expect((await post(t, hook, '{}', 'wrong')).status).toBe(401);
      }
      for (const t of [a, b]) {
        const res = await post(t, hook, '{}');
        expect(res.status).toBe(429);
        expect(res.body).toMatchObject({ error: 'rate_limited' });
        expect(res.body.detail).toMatch(/failed authentication/);
      }
      expect((await deliveriesOf(a.service.db, hook.id)).length).toBe(20);
    },
  );

  it.skipIf(skip || !env.REDIS_URL)(
    'with REDIS_URL the windows live in Redis, not in PostgreSQL (the Redis store only)',
    async () => {
      const hook = await createWebhook(a, factory);
      expect((await post(a, hook, '{"r":1}')).status).toBe(202);
      expect(await a.service.db.query(`SELECT key FROM rate_limits`)).toEqual([]);
    },
  );
});
