import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAutomation,
  createFactory,
  createWebhook,
  deliver,
  deliveriesOf,
  type FactoryFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

/** The contract's limit of 60 per minute, and a service whose limit is raised for load-shaped tests. */
let t: TestService;
let fast: TestService;
let factory: FactoryFixture;
let fastFactory: FactoryFixture;
beforeAll(async () => {
  [t, fast] = await Promise.all([
    startTestService(),
    startTestService({ WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000' }),
  ]);
  factory = await createFactory(t);
  fastFactory = await createFactory(fast);
});
afterAll(async () => Promise.all([t?.stop(), fast?.stop()]));

describe('ingress reliability on loopback', () => {
  it('100 concurrent identical deliveries → exactly 1 Accepted, 99 Duplicate, runs started once', async () => {
    const hook = await createWebhook(fast, fastFactory);
    await createAutomation(fast, fastFactory, { name: `race-${hook.uid}`, webhookUid: hook.uid });
    const body = JSON.stringify({ event: 'same', at: 1 });
    const results = await Promise.all(
      Array.from({ length: 100 }, () =>
        deliver(fast.url, `/webhooks/w/${hook.uid}`, body, { authorization: `Bearer ${hook.secret}` }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(100).fill(202));
    expect(new Set(results.map((r) => r.body.delivery_id)).size).toBe(1);
    const log = await deliveriesOf(fast.service.db, hook.id);
    expect(log.filter((e) => e.status === 'accepted').length).toBe(1);
    expect(log.filter((e) => e.status === 'duplicate').length).toBe(99);
    const runs = await fast.service.db.query(`SELECT id FROM runs WHERE metadata->>'webhook_uid' = $1`, [
      hook.uid,
    ]);
    expect(runs.length).toBe(1);
  });

  it('240 deliveries within a minute to one webhook → exactly 60 Accepted, the rest 429 with Retry-After, no 5xx', async () => {
    const hook = await createWebhook(t, factory);
    const results = await Promise.all(
      Array.from({ length: 240 }, (_, i) =>
        deliver(t.url, `/webhooks/w/${hook.uid}`, JSON.stringify({ i }), {
          authorization: `Bearer ${hook.secret}`,
        }),
      ),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 202).length).toBe(60);
    expect(statuses.filter((s) => s === 429).length).toBe(180);
    for (const r of results.filter((x) => x.status === 429)) {
      const after = Number(r.headers.get('retry-after'));
      expect(Number.isInteger(after) && after >= 1 && after <= 60).toBe(true);
      expect(r.body).toMatchObject({ status: 429, error: 'rate_limited' });
    }
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.length).toBe(60);
    expect(log.every((e) => e.status === 'accepted')).toBe(true);
  });
});
