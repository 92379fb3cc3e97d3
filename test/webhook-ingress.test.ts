import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAgent,
  createAutomation,
  createFactory,
  createWebhook,
  deliver,
  deliveriesOf,
  type FactoryFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

let t: TestService;
let factory: FactoryFixture;
beforeAll(async () => {
  t = await startTestService();
  factory = await createFactory(t, { agentDefaults: { model: 'claude-x', environmentId: 'env-1' } });
  await createAgent(t, factory, {
    name: 'foreman',
    agentType: 'FOREMAN',
    basePrompt: 'You are the foreman.',
  });
});
afterAll(async () => t?.stop());

const bearer = (s: string) => ({ authorization: `Bearer ${s}` });

describe('docs/webhooks.md processing order, row by row', () => {
  it('method is not POST → 405 with Allow: POST, no log entry', async () => {
    const hook = await createWebhook(t, factory);
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const res = await fetch(`${t.url}/webhooks/w/${hook.uid}`, { method, headers: bearer(hook.secret) });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res.json()).toMatchObject({ status: 405, error: 'method_not_allowed' });
    }
    const head = await fetch(`${t.url}/webhooks/w/${hook.uid}`, { method: 'HEAD' });
    expect(head.status).toBe(405);
    expect(head.headers.get('allow')).toBe('POST');
    expect(await deliveriesOf(t.service.db, hook.id)).toEqual([]);
  });

  it('uid unknown, webhook disabled or deleted → 404, no log entry', async () => {
    const disabled = await createWebhook(t, factory, { enabled: false });
    const deleted = await createWebhook(t, factory, { deleted: true });
    for (const uid of ['NoSuchWebhookUid000000', disabled.uid, deleted.uid]) {
      const res = await deliver(t.url, `/webhooks/w/${uid}`, '{}', bearer(disabled.secret));
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ status: 404, error: 'resource_not_found' });
    }
    expect(await deliveriesOf(t.service.db, disabled.id)).toEqual([]);
    expect(await deliveriesOf(t.service.db, deleted.id)).toEqual([]);
  });

  it('token missing or wrong → 401 Rejected (auth); the credential is not logged', async () => {
    const hook = await createWebhook(t, factory);
    const missing = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}');
    const wrong = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer('not-the-secret'));
    for (const res of [missing, wrong]) {
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ status: 401, error: 'authentication_required' });
    }
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.map((e) => e.status)).toEqual(['rejected_auth', 'rejected_auth']);
    expect(JSON.stringify(log)).not.toContain('not-the-secret');
    expect(log[1]!.headers.authorization).toBeUndefined();
  });

  it('url_token: right token in the path → 202; missing or wrong → 401 Rejected (auth), token never echoed', async () => {
    const hook = await createWebhook(t, factory, { authMode: 'url_token' });
    const ok = await deliver(t.url, `/webhooks/w/${hook.uid}/${hook.secret}`, '{"a":1}');
    expect(ok.status).toBe(202);
    const wrong = await deliver(t.url, `/webhooks/w/${hook.uid}/wrongtoken`, '{}');
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(wrong.body)).not.toContain('wrongtoken');
    const none = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer(hook.secret));
    expect(none.status).toBe(401);
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.map((e) => e.status)).toEqual(['accepted', 'rejected_auth', 'rejected_auth']);
  });

  it('failed-auth budget for (webhook, address) spent → 429 + Retry-After, no log entry', async () => {
    const hook = await createWebhook(t, factory);
    for (let i = 0; i < 20; i++) {
      expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer('wrong'))).status).toBe(401);
    }
    const res = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', bearer(hook.secret));
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(res.body).toMatchObject({ status: 429, error: 'rate_limited' });
    expect((await deliveriesOf(t.service.db, hook.id)).length).toBe(20);
  });

  it('body over 262,144 bytes → 413 Rejected (too large); exactly 262,144 is fine', async () => {
    const hook = await createWebhook(t, factory);
    const fits = JSON.stringify({ p: 'x'.repeat(262_144 - 8) });
    expect(Buffer.byteLength(fits)).toBe(262_144);
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, fits, bearer(hook.secret))).status).toBe(202);
    const big = JSON.stringify({ p: 'x'.repeat(262_144) });
    const res = await deliver(t.url, `/webhooks/w/${hook.uid}`, big, bearer(hook.secret));
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ status: 413, error: 'payload_too_large' });
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.map((e) => e.status)).toEqual(['accepted', 'rejected_too_large']);
    expect(Number(log[1]!.size_bytes)).toBeGreaterThan(262_144);
    expect(log[1]!.payload).toBeNull();
  });

  it('signature missing, wrong, stale → 401 Rejected (auth); right → 202 with the provider delivery id', async () => {
    const hook = await createWebhook(t, factory, {
      authMode: 'signature',
      scheme: 'github',
      secret: 'gh-secret',
    });
    const body = '{"action":"opened"}';
    const sig = `sha256=${createHmac('sha256', 'gh-secret').update(body).digest('hex')}`;
    const path = `/webhooks/w/${hook.uid}`;
    expect((await deliver(t.url, path, body)).status).toBe(401);
    const wrong = await deliver(t.url, path, body, { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` });
    expect(wrong.status).toBe(401);
    expect(wrong.body.detail).toMatch(/signature/i);
    const ok = await deliver(t.url, path, body, { 'x-hub-signature-256': sig, 'x-github-delivery': 'gh-1' });
    expect(ok.status).toBe(202);
    expect(ok.body).toEqual({ delivery_id: 'gh-1' });
    const swh = await createWebhook(t, factory, {
      authMode: 'signature',
      scheme: 'standard_webhooks',
      secret: 'whsec_' + Buffer.from('k'.repeat(32)).toString('base64'),
    });
    const stale = Math.floor(Date.now() / 1000) - 600;
    const staleSig = createHmac('sha256', Buffer.from('k'.repeat(32)))
      .update(`m1.${stale}.${body}`)
      .digest('base64');
    const res = await deliver(t.url, `/webhooks/w/${swh.uid}`, body, {
      'webhook-id': 'm1',
      'webhook-timestamp': String(stale),
      'webhook-signature': `v1,${staleSig}`,
    });
    expect(res.status).toBe(401);
    expect((await deliveriesOf(t.service.db, hook.id)).map((e) => e.status)).toEqual([
      'rejected_auth',
      'rejected_auth',
      'accepted',
    ]);
    expect((await deliveriesOf(t.service.db, swh.id)).map((e) => e.status)).toEqual(['rejected_auth']);
  });

  it('body is not valid JSON → 400 Rejected (invalid JSON); any JSON value and null are fine; Content-Type ignored', async () => {
    const hook = await createWebhook(t, factory);
    const path = `/webhooks/w/${hook.uid}`;
    for (const bad of ['', '{', 'nope', '{"a":1}{', '\ufeff{}']) {
      const res = await deliver(t.url, path, bad, {
        ...bearer(hook.secret),
        'content-type': 'application/json',
      });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ status: 400, error: 'invalid_request' });
    }
    for (const good of ['null', '1', '"s"', '[1,2]', 'true', '{"x":{"y":[]}}']) {
      const res = await deliver(t.url, path, good, { ...bearer(hook.secret), 'content-type': 'text/plain' });
      expect(res.status).toBe(202);
    }
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.slice(0, 5).every((e) => e.status === 'rejected_invalid_json' && e.payload === null)).toBe(
      true,
    );
    expect(log.slice(5).every((e) => e.status === 'accepted')).toBe(true);
  });

  it('identity already accepted → 202 with the same delivery_id, Duplicate, starts nothing', async () => {
    const hook = await createWebhook(t, factory);
    await createAutomation(t, factory, { name: `dup-${hook.uid}`, webhookUid: hook.uid });
    const path = `/webhooks/w/${hook.uid}`;
    const headers = { ...bearer(hook.secret), 'x-service-delivery-id': 'evt-42' };
    const first = await deliver(t.url, path, '{"n":1}', headers);
    const again = await deliver(t.url, path, '{"n":2}', headers);
    expect(first).toMatchObject({ status: 202, body: { delivery_id: 'evt-42' } });
    expect(again).toMatchObject({ status: 202, body: { delivery_id: 'evt-42' } });
    const log = await deliveriesOf(t.service.db, hook.id);
    expect(log.map((e) => e.status)).toEqual(['accepted', 'duplicate']);
    expect(log[1]!.payload).toBeNull();
    const runs = await t.service.db.query(`SELECT id FROM runs WHERE metadata->>'webhook_uid' = $1`, [
      hook.uid,
    ]);
    expect(runs.length).toBe(1);
  });

  it('otherwise → 202 {delivery_id}, Accepted with payload; a run per matching automation, with envelope and attachment', async () => {
    const hook = await createWebhook(t, factory);
    await createAgent(t, factory, {
      name: `triage-${hook.uid}`,
      basePrompt: 'You triage.',
      overrides: { model: 'agent-model' },
    });
    await createAutomation(t, factory, {
      name: `opened-${hook.uid}`,
      webhookUid: hook.uid,
      payload: { action: ['opened'] },
      prompt: 'Triage the new issue.',
      agent: `triage-${hook.uid}`,
      overrides: { workerHost: 'box-1' },
    });
    await createAutomation(t, factory, {
      name: `closed-${hook.uid}`,
      webhookUid: hook.uid,
      payload: { action: ['closed'] },
    });
    const body = '{"action":"opened","issue":{"number":7}}';
    const res = await deliver(t.url, `/webhooks/w/${hook.uid}`, body, bearer(hook.secret));
    const identity = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    expect(res).toMatchObject({ status: 202, body: { delivery_id: identity } });
    const [entry] = await deliveriesOf(t.service.db, hook.id);
    expect(entry).toMatchObject({
      status: 'accepted',
      identity,
      payload: body,
      client_address: expect.stringMatching(/127\.0\.0\.1/),
    });
    const runs = await t.service.db.query(
      `SELECT r.id, r.prompt, r.source, r.agent_config, r.metadata, a.file_name, a.content
         FROM runs r JOIN run_attachments a ON a.run_id = r.id WHERE r.metadata->>'webhook_uid' = $1`,
      [hook.uid],
    );
    expect(runs.length).toBe(1);
    const run = runs[0]!;
    expect(run.source).toBe('WEBHOOK');
    expect(run.prompt).toMatch(/^Triage the new issue\./);
    expect(run.prompt).toContain(hook.uid);
    expect(run.prompt).toContain(identity);
    expect(run.prompt).toMatch(/untrusted/);
    expect(run.file_name).toBe('event-payload.json');
    expect(run.content.toString()).toBe(body);
    expect(run.metadata).toMatchObject({
      webhook_uid: hook.uid,
      webhook_delivery_id: identity,
      webhook_delivery_entry: entry!.id,
      automation: `opened-${hook.uid}`,
      // What the Oz clients' automation_id and factory_uid list filters match.
      automation_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      factory_uid: factory.uid,
    });
    expect(run.agent_config).toEqual({
      name: `triage-${hook.uid}`,
      model_id: 'agent-model',
      environment_id: 'env-1',
      base_prompt: 'You triage.',
      worker_host: 'box-1',
    });
  });
  it('attaches the exact bytes received to every run the delivery starts (multi-byte text, escapes, a trailing newline)', async () => {
    const hook = await createWebhook(t, factory);
    for (const name of ['one', 'two'])
      await createAutomation(t, factory, {
        name: `${name}-${hook.uid}`,
        webhookUid: hook.uid,
        payload: { action: ['opened'] },
      });
    const body = Buffer.from(
      '{"action":"opened","title":"é ✓ 😀","escaped":"\\u00e9 \\ud83d\\ude00 \\"q\\""}\n',
    );
    const res = await deliver(t.url, `/webhooks/w/${hook.uid}`, body, bearer(hook.secret));
    expect(res.status).toBe(202);
    const attached = await t.service.db.query<{ content: Buffer }>(
      `SELECT a.content FROM runs r JOIN run_attachments a ON a.run_id = r.id WHERE r.metadata->>'webhook_uid' = $1`,
      [hook.uid],
    );
    expect(attached).toHaveLength(2);
    for (const a of attached) expect(Buffer.compare(a.content, body)).toBe(0);
  });
});
