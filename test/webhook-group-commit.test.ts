import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newUuid } from '../src/common/ids.js';
import { DeliveryCommits, type PendingDelivery } from '../src/webhooks/delivery-commits.js';
import {
  createAutomation,
  createFactory,
  createWebhook,
  deliver,
  deliveriesOf,
  type FactoryFixture,
  type WebhookFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * Deliveries that arrive together commit together; a delivery the database refuses fails alone.
 * The refusal is real: a CHECK constraint on this test's database rejects one identity.
 */
let t: TestService;
let factory: FactoryFixture;
let hook: WebhookFixture;
beforeAll(async () => {
  t = await startTestService({ WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000' });
  factory = await createFactory(t);
  hook = await createWebhook(t, factory);
  await createAutomation(t, factory, { name: 'on-any', webhookUid: hook.uid });
  await t.service.db.execute(
    `ALTER TABLE deliveries ADD CONSTRAINT test_refuses_poison CHECK (identity IS DISTINCT FROM 'poison')`,
  );
});
afterAll(async () => t?.stop());

const pending = (identity: string): PendingDelivery => {
  const body = Buffer.from(JSON.stringify({ identity }));
  const id = newUuid();
  return {
    entry: {
      id,
      webhookId: hook.id,
      status: 'accepted',
      identity,
      sizeBytes: body.length,
      receivedAt: new Date(),
      clientAddress: '127.0.0.1',
      headers: {},
      payloadText: body.toString(),
    },
    runs: [
      {
        teamId: factory.teamId,
        title: `run for ${identity}`,
        prompt: 'Handle it.',
        source: 'WEBHOOK',
        creatorId: null,
        agentConfig: {},
        metadata: { webhook_delivery_entry: id },
        attachments: [{ fileName: 'event-payload.json', contentType: 'application/json', content: body }],
      },
    ],
  };
};

describe('group commit', () => {
  it('a batch with one delivery the database refuses: that one fails, every other one is committed with its run', async () => {
    const commits = t.service.app.get(DeliveryCommits);
    // Submitted in one tick: the first goes out at once, the rest wait for it and go out together,
    // the refused one among them.
    const identities = Array.from({ length: 12 }, (_, i) => (i === 6 ? 'poison' : `gc-${i}`));
    const settled = await Promise.allSettled(identities.map((id) => commits.record(pending(id))));
    expect(settled.map((s) => s.status)).toEqual(
      identities.map((id) => (id === 'poison' ? 'rejected' : 'fulfilled')),
    );
    expect(settled.filter((s) => s.status === 'fulfilled').map((s) => s.value)).toEqual(
      Array(11).fill('accepted'),
    );

    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.map((e) => e.identity).sort()).toEqual(identities.filter((id) => id !== 'poison').sort());
    const runs = await t.service.db.query<{ title: string }>(
      `SELECT r.title FROM runs r JOIN run_attachments a ON a.run_id = r.id WHERE r.title LIKE 'run for gc-%'`,
    );
    expect(runs.length).toBe(11);
  });

  it('over HTTP: 40 concurrent deliveries, one refused → one 500, 39 × 202 each with its row and run', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        deliver(t.url, `/webhooks/w/${hook.uid}`, JSON.stringify({ i }), {
          authorization: `Bearer ${hook.secret}`,
          'x-service-delivery-id': i === 20 ? 'poison' : `http-${i}`,
        }),
      ),
    );
    expect(results.filter((r) => r.status === 202).length).toBe(39);
    expect(results[20]!.status).toBe(500);
    expect(results[20]!.body).toMatchObject({ error: 'internal_error', retryable: true });
    const stored = new Set((await deliveriesOf(t.service.db, hook.id)).map((e) => e.identity));
    for (const r of results.filter((x) => x.status === 202))
      expect(stored.has(r.body.delivery_id)).toBe(true);
    const runs = await t.service.db.query(
      `SELECT 1 FROM runs WHERE metadata->>'webhook_uid' = $1 AND metadata->>'webhook_delivery_id' LIKE 'http-%'`,
      [hook.uid],
    );
    expect(runs.length).toBe(39);
  });
});
