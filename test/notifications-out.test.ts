import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { NotificationRetention } from '../src/notifications/notification-retention.js';
import { runCli } from './support/cli.js';
import { createFactory, createWebhook, deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { NotificationReceiver } from './support/notification-receiver.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// A real service with one worker slot running the example harness, notifications to a real receiver on
// loopback; the retry schedule is three immediate attempts and two failed messages disable an endpoint.
let t: TestService;
beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '1',
    NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
    NOTIFICATIONS_RETRY_SCHEDULE_MS: '0,0,0',
    NOTIFICATIONS_DISABLE_AFTER: '2',
    NOTIFICATIONS_TIMEOUT_MS: '300',
  });
});
afterAll(async () => t?.stop());

const receivers: NotificationReceiver[] = [];
afterAll(async () => {
  for (const r of receivers) await r.stop();
});

/** A receiver and an endpoint of the team `default` (or `key`'s team) pointing at it. */
async function subscribe(body: Record<string, unknown> = {}, key?: string) {
  const receiver = new NotificationReceiver();
  receivers.push(receiver);
  const url = await receiver.start();
  const res = await t.call(
    'POST',
    '/api/v1/notifications/endpoints',
    { name: `ep-${receivers.length}-${Date.now()}`, url, ...body },
    key,
  );
  expect(res.status).toBe(201);
  expect(res.body.secret).toMatch(/^whsec_/);
  receiver.secret = res.body.secret;
  return { receiver, endpoint: res.body.endpoint as { id: string } };
}

const createRun = async (prompt: string) => {
  const res = await t.call('POST', '/api/v1/agent/runs', { prompt });
  expect(res.status).toBe(200);
  return res.body.run_id as string;
};

const attempts = async (endpointId: string) =>
  (await t.call('GET', `/api/v1/notifications/endpoints/${endpointId}/attempts?limit=200`)).body
    .attempts as any[];
const messages = async (endpointId: string) =>
  (await t.call('GET', `/api/v1/notifications/endpoints/${endpointId}/messages`)).body.messages as any[];

describe('signed notifications out', () => {
  it('notifies every transition of a run, in order, each signed as Standard Webhooks', async () => {
    const { receiver } = await subscribe({ event_types: [] });
    const runId = await createRun('Triage the new issue');
    await runIn(t, runId, ['SUCCEEDED']);
    const got = await eventually(() => {
      const r = receiver.ofRun(runId);
      return r.at(-1)?.body.type === 'run.succeeded' ? r : undefined;
    }, 'the run.succeeded notification');
    expect(got.every((r) => r.verified)).toBe(true);
    // The database builds the body; its shape is the contract's (schemas/api/run-notification.schema.json).
    const schemas = new SchemaRegistry();
    for (const r of got) expect(schemas.check('RunNotification', r.body), r.body.type).toEqual([]);
    expect(got[0]!.body.type).toBe('run.queued');
    expect(got[0]!.body.data.previous_state).toBeNull();
    // Each notification continues where the one before left: no transition missing, none reordered.
    for (let i = 1; i < got.length; i++) {
      expect(got[i]!.body.data.previous_state).toBe(got[i - 1]!.body.data.state);
      expect(got[i]!.body.type).toBe(`run.${String(got[i]!.body.data.state).toLowerCase()}`);
    }
    expect(got.map((r) => r.body.data.state)).toContain('CLAIMED');
    expect(new Set(got.map((r) => r.id)).size).toBe(got.length);
  });

  it('delivers only the chosen event types', async () => {
    const { receiver, endpoint } = await subscribe({ event_types: ['run.succeeded'] });
    const runId = await createRun('Only the end');
    await runIn(t, runId, ['SUCCEEDED']);
    await eventually(() => receiver.ofRun(runId).length === 1, 'one notification');
    expect(receiver.ofRun(runId)[0]!.body.type).toBe('run.succeeded');
    const listed = await messages(endpoint.id);
    expect(listed.filter((m) => m.run_id === runId).map((m) => m.type)).toEqual(['run.succeeded']);
  });

  it('retries a 500 and a timeout, logging every attempt, until the endpoint takes it', async () => {
    const { receiver, endpoint } = await subscribe({ event_types: ['run.queued'] });
    receiver.behaviour = (n) => (n === 1 ? 500 : n === 2 ? 'hang' : 204);
    const runId = await createRun('Retry me');
    const [message] = await eventually(async () => {
      const m = (await messages(endpoint.id)).filter((x) => x.run_id === runId);
      return m[0]?.status === 'delivered' ? m : undefined;
    }, 'the message delivered');
    expect(message.attempts).toBe(3);
    const log = (await attempts(endpoint.id)).filter((a) => a.message_id === message.id).reverse();
    expect(log.map((a) => [a.succeeded, a.status_code])).toEqual([
      [false, 500],
      [false, null],
      [true, 204],
    ]);
    expect(log[0].response_excerpt).toBe('nope 500');
    expect(log[1].error).toMatch(/timed out/);
    expect(log.every((a) => typeof a.latency_ms === 'number')).toBe(true);
    // The same message id on every attempt: receivers deduplicate on webhook-id.
    expect(new Set(receiver.ofRun(runId).map((r) => r.id))).toEqual(new Set([message.id]));
  });

  it('holds a run’s next event until the one before is delivered or given up', async () => {
    const { receiver, endpoint } = await subscribe({ event_types: ['run.queued', 'run.cancelled'] });
    receiver.behaviour = (n) => (n <= 2 ? 503 : 200);
    const runId = await createRun('Cancel me quickly\n/wait 30');
    await t.call('POST', `/api/v1/agent/runs/${runId}/cancel`);
    await eventually(
      () => receiver.ofRun(runId).some((r) => r.body.type === 'run.cancelled'),
      'run.cancelled',
    );
    const types = receiver.ofRun(runId).map((r) => r.body.type);
    // Every run.queued attempt comes before the first run.cancelled one.
    expect(types.lastIndexOf('run.queued')).toBeLessThan(types.indexOf('run.cancelled'));
    expect(types.filter((x) => x === 'run.queued')).toHaveLength(3);
    await eventually(
      async () => (await messages(endpoint.id)).every((m) => m.status === 'delivered'),
      'both messages delivered',
    );
  });

  it('gives a message up after the schedule, disables the endpoint after a run of failed messages, and resends', async () => {
    const { receiver, endpoint } = await subscribe({ event_types: ['run.queued'] });
    receiver.behaviour = () => 500;
    await createRun('Fail one');
    await createRun('Fail two');
    const disabled = await eventually(async () => {
      const e = (await t.call('GET', `/api/v1/notifications/endpoints/${endpoint.id}`)).body;
      return !e.enabled && e;
    }, 'the endpoint disabled');
    expect(disabled.disabled_reason).toMatch(/2 messages in a row failed every attempt/);
    const failed = await messages(endpoint.id);
    expect(failed.map((m) => [m.status, m.attempts])).toEqual([
      ['failed', 3],
      ['failed', 3],
    ]);
    expect((await attempts(endpoint.id)).filter((a) => !a.succeeded)).toHaveLength(6);
    // Enabled again and asked to resend, the message goes out; the other stays failed.
    receiver.behaviour = () => 200;
    const enabled = await t.call('PATCH', `/api/v1/notifications/endpoints/${endpoint.id}`, {
      enabled: true,
    });
    expect(enabled.body).toMatchObject({ enabled: true, consecutive_failures: 0 });
    expect(enabled.body.disabled_reason).toBeUndefined();
    const resend = await t.call(
      'POST',
      `/api/v1/notifications/endpoints/${endpoint.id}/messages/${failed[0].id}/resend`,
    );
    expect(resend.status).toBe(202);
    await eventually(
      async () => (await messages(endpoint.id)).find((m) => m.id === failed[0].id)?.status === 'delivered',
      'resent',
    );
    const last = receiver.received.at(-1)!;
    expect(last).toMatchObject({ id: failed[0].id, verified: true });
    expect((await messages(endpoint.id)).find((m) => m.id === failed[1].id)?.status).toBe('failed');
  });

  it('prunes settled messages and their attempts after the retention days; pending ones stay whatever their age', async () => {
    const { endpoint } = await subscribe({ event_types: ['run.queued'] });
    for (const prompt of ['Keep one', 'Keep two', 'Keep three']) await createRun(prompt);
    const sent = await eventually(async () => {
      const m = await messages(endpoint.id);
      return m.length === 3 && m.every((x) => x.status === 'delivered') ? m : undefined;
    }, 'three messages delivered');
    const [old, oldPending, recent] = sent.map((m) => m.id as string);
    // Two of them 31 days old (the retention is 30), one of those pending again (its retry a day away).
    await t.service.db.execute(
      `UPDATE notification_messages SET created_at = now() - interval '31 days' WHERE id = ANY($1::uuid[])`,
      [[old, oldPending]],
    );
    await t.service.db.execute(
      `UPDATE notification_messages SET status = 'pending', next_attempt_at = now() + interval '1 day' WHERE id = $1`,
      [oldPending],
    );
    expect(await t.service.app.get(NotificationRetention).runOnce()).toBe(1);
    expect((await messages(endpoint.id)).map((m) => m.id).sort()).toEqual([oldPending, recent].sort());
    const left = await attempts(endpoint.id);
    expect(left.map((a) => a.message_id).sort()).toEqual([oldPending, recent].sort());
    // Run again, it finds nothing more to take.
    expect(await t.service.app.get(NotificationRetention).runOnce()).toBe(0);
  });

  it('rotates the secret: the new one signs, the old one does not', async () => {
    const { receiver, endpoint } = await subscribe({ event_types: ['run.queued'] });
    const rotated = await t.call('POST', `/api/v1/notifications/endpoints/${endpoint.id}/rotate`);
    expect(rotated.status).toBe(200);
    const old = receiver.secret;
    receiver.secret = rotated.body.secret;
    expect(receiver.secret).not.toBe(old);
    const runId = await createRun('Signed anew');
    const [got] = await eventually(
      () => (receiver.ofRun(runId).length > 0 ? receiver.ofRun(runId) : undefined),
      'notified',
    );
    expect(got!.verified).toBe(true);
    expect(
      JSON.stringify((await t.call('GET', `/api/v1/notifications/endpoints/${endpoint.id}`)).body),
    ).not.toContain('whsec_');
  });

  it('notifies accepted and rejected deliveries (a Duplicate is no event)', async () => {
    const { receiver } = await subscribe({ event_types: ['delivery.accepted', 'delivery.rejected'] });
    const hook = await createWebhook(t, await createFactory(t));
    const path = `/webhooks/w/${hook.uid}`;
    const headers = { authorization: `Bearer ${hook.secret}`, 'x-service-delivery-id': 'd-1' };
    expect((await deliver(t.url, path, '{"n":1}', headers)).status).toBe(202);
    expect((await deliver(t.url, path, '{"n":1}', headers)).status).toBe(202);
    expect((await deliver(t.url, path, '{"n":2}', { authorization: 'Bearer wrong' })).status).toBe(401);
    const ofHook = () => receiver.received.filter((r) => r.body.data.webhook_uid === hook.uid);
    await eventually(() => ofHook().length >= 2, 'two delivery notifications');
    expect(ofHook().every((r) => r.verified)).toBe(true);
    expect(ofHook().map((r) => [r.body.type, r.body.data.status, r.body.data.delivery_id])).toEqual([
      ['delivery.accepted', 'accepted', 'd-1'],
      ['delivery.rejected', 'rejected_auth', null],
    ]);
  });

  it('refuses bad endpoints with 400 naming the field', async () => {
    const bad = async (body: Record<string, unknown>) =>
      t.call('POST', '/api/v1/notifications/endpoints', body);
    const noUrl = await bad({ name: 'x' });
    expect(noUrl.status).toBe(400);
    const ftp = await bad({ name: 'x', url: 'ftp://example.com/' });
    expect(ftp.status).toBe(400);
    expect(ftp.body.detail).toMatch(/http/);
    const badType = await bad({ name: 'x', url: 'https://example.com/', event_types: ['run.exploded'] });
    expect(badType.status).toBe(400);
    const dup = await subscribe();
    const again = await t.call('GET', `/api/v1/notifications/endpoints/${dup.endpoint.id}`);
    const same = await bad({ name: again.body.name, url: 'https://example.com/' });
    expect(same.status).toBe(409);
  });

  it.skipIf(twoTeamsRefused)(
    `keeps one team’s endpoints, messages and attempts from another (404, never a leak)${twoTeamsNote}`,
    async () => {
      const { endpoint } = await subscribe({ event_types: ['run.queued'] });
      await createRun('Private to default');
      await eventually(async () => (await messages(endpoint.id)).length > 0, 'a message');
      const [message] = await messages(endpoint.id);
      const attacker = await t.newTeam(`attacker-${Date.now()}`, [
        'runs:read',
        'runs:write',
        'factory:manage',
      ]);
      const base = `/api/v1/notifications/endpoints/${endpoint.id}`;
      for (const [method, path, body] of [
        ['GET', base],
        ['GET', `${base}/messages`],
        ['GET', `${base}/attempts`],
        ['PATCH', base, { url: 'http://127.0.0.1:1/steal' }],
        ['POST', `${base}/rotate`],
        ['POST', `${base}/messages/${message.id}/resend`],
        ['DELETE', base],
      ] as const) {
        const res = await t.call(method, path, body, attacker.key);
        expect(res.status, `${method} ${path}`).toBe(404);
      }
      const listed = await t.call('GET', '/api/v1/notifications/endpoints', undefined, attacker.key);
      expect(listed.body.endpoints).toEqual([]);
      // The attacker's own endpoint hears nothing of the other team's runs.
      const theirs = await subscribe({}, attacker.key);
      const runId = await createRun('Not for the attacker');
      await runIn(t, runId, ['SUCCEEDED']);
      expect(theirs.receiver.received).toEqual([]);
      expect((await t.call('GET', base)).status).toBe(200);
    },
  );

  it('needs factory:manage to change endpoints and runs:read to read them', async () => {
    const { endpoint } = await subscribe();
    const reader = await t.newKey([t.defaultTeam], ['runs:read']);
    expect(
      (await t.call('GET', `/api/v1/notifications/endpoints/${endpoint.id}`, undefined, reader)).status,
    ).toBe(200);
    expect(
      (await t.call('POST', `/api/v1/notifications/endpoints/${endpoint.id}/rotate`, undefined, reader))
        .status,
    ).toBe(403);
    expect(
      (await t.call('DELETE', `/api/v1/notifications/endpoints/${endpoint.id}`, undefined, reader)).status,
    ).toBe(403);
  });

  it('works from the command line: create (secret once), list, attempts, resend', async () => {
    const receiver = new NotificationReceiver();
    receivers.push(receiver);
    const url = await receiver.start();
    const cli = (...args: string[]) =>
      runCli([...args, '--json'], { env: { FACTORYD_API_URL: t.url, FACTORYD_API_KEY: t.adminKey } });
    const created = await cli(
      'notifications',
      'create',
      `cli-${Date.now()}`,
      '--url',
      url,
      '--events',
      'run.queued',
    );
    expect(created.code, created.stderr).toBe(0);
    const { endpoint, secret } = JSON.parse(created.stdout);
    receiver.secret = secret;
    const listed = JSON.parse((await cli('notifications', 'list')).stdout);
    expect(listed.endpoints.map((e: { id: string }) => e.id)).toContain(endpoint.id);
    expect(JSON.stringify(listed)).not.toContain('whsec_');
    const runId = await createRun('From the CLI');
    await eventually(() => receiver.ofRun(runId).length === 1, 'notified');
    const log = await eventually(async () => {
      const a = JSON.parse((await cli('notifications', 'attempts', endpoint.id)).stdout).attempts;
      return a.length === 1 ? a : undefined;
    }, 'the attempt logged');
    const resent = await cli('notifications', 'resend', endpoint.id, log[0].message_id);
    expect(resent.code, resent.stderr).toBe(0);
    await eventually(() => receiver.ofRun(runId).length === 2, 'sent again');
    expect(receiver.ofRun(runId).every((r) => r.verified && r.id === log[0].message_id)).toBe(true);
  });
});
