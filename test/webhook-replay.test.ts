import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookDirectory } from '../src/webhooks/webhook-directory.js';
import {
  createAutomation,
  createFactory,
  createWebhook,
  deliver,
  deliveriesOf,
  updateWebhook,
  type FactoryFixture,
  type WebhookFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * Header filters, replay and search of the delivery log through the API (docs/webhooks.md "Header
 * filters", "Replay", "Searching the delivery log"): given a webhook and its automations, when a
 * sender posts or an operator replays, then these entries, these runs.
 */
let t: TestService;
let factory: FactoryFixture;
let other: { key: string };
let readerKey: string;
beforeAll(async () => {
  t = await startTestService();
  factory = await createFactory(t);
  other = await t.newTeam('replay-attackers');
  readerKey = await t.newKey([t.defaultTeam], ['runs:read', 'runs:write']);
});
afterAll(async () => t?.stop());

const bearer = (s: string) => ({ authorization: `Bearer ${s}` });

/** An automation with one trigger on `webhookUid`, committed and applied like a team's. */
const automation = (name: string, webhookUid: string, filter: { payload?: any; headers?: any }) =>
  createAutomation(t, factory, { name, webhookUid, ...filter });

const entries = (hook: WebhookFixture) => t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries`);
const entry = (hook: WebhookFixture, id: string, key?: string) =>
  t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries/${id}`, undefined, key);

describe('header filters', () => {
  it('a trigger on X-GitHub-Event: push starts a run for a push delivery and not for pull_request', async () => {
    const hook = await createWebhook(t, factory);
    await automation(`pushes-${hook.uid}`, hook.uid, { headers: { 'X-GitHub-Event': ['push'] } });
    const path = `/webhooks/w/${hook.uid}`;
    const push = await deliver(t.url, path, '{"ref":"main"}', {
      ...bearer(hook.secret),
      'X-GitHub-Event': 'push',
    });
    const pr = await deliver(t.url, path, '{"ref":"pr"}', {
      ...bearer(hook.secret),
      'X-GitHub-Event': 'pull_request',
    });
    expect([push.status, pr.status]).toEqual([202, 202]);
    const [prEntry, pushEntry] = (await entries(hook)).body.deliveries;
    expect((await entry(hook, pushEntry.id)).body).toMatchObject({
      headers: { 'x-github-event': 'push' },
      runs: [{ state: 'QUEUED' }],
    });
    expect((await entry(hook, prEntry.id)).body).toMatchObject({
      headers: { 'x-github-event': 'pull_request' },
      runs: [],
    });
  });

  it('a header the trigger filters on is stored with the delivery (the rest of the unlisted ones are not); a credential never is', async () => {
    const hook = await createWebhook(t, factory);
    await automation(`deploys-${hook.uid}`, hook.uid, { headers: { 'x-event-kind': ['deploy'] } });
    // Written straight to the table: the definition check refuses a credential header (see
    // test/definition-header-filters.test.ts); the ingress must still neither store nor match it.
    await t.service.db.execute(
      `INSERT INTO automations (factory_id, name, path, enabled, triggers, overrides, prompt)
       VALUES ($1, $2, $3, true, $4, '{}', 'Handle it.')`,
      [
        factory.id,
        `creds-${hook.uid}`,
        `automations/creds-${hook.uid}/automation.md`,
        JSON.stringify([
          {
            provider: 'webhook',
            event: 'received',
            filter: { webhook_ids: [hook.uid], headers: { Authorization: { exists: true } } },
          },
        ]),
      ],
    );
    await t.service.app.get(WebhookDirectory).refresh(factory.id);
    const sent = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', {
      ...bearer(hook.secret),
      'X-Event-Kind': 'deploy',
      'X-Unlisted': 'no',
    });
    expect(sent.status).toBe(202);
    const [row] = await deliveriesOf(t.service.db, hook.id);
    expect(row!.headers['x-event-kind']).toBe('deploy');
    expect(row!.headers).not.toHaveProperty('x-unlisted');
    expect(row!.headers).not.toHaveProperty('authorization');
    const shown = (await entry(hook, row!.id)).body;
    expect(shown.runs).toHaveLength(1); // deploys only: creds needs an Authorization it never sees
  });

  it('Test filter names each header path with its outcome', async () => {
    const hook = await createWebhook(t, factory);
    await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"action":"opened"}', {
      ...bearer(hook.secret),
      'X-GitHub-Event': 'pull_request',
    });
    const res = await t.call('POST', `/api/v1/webhooks/${hook.uid}/test-filter`, {
      filter: { payload: { action: ['opened'] }, headers: { 'X-GitHub-Event': ['push'] } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      result: 'would_not_trigger',
      payload_check: { passed: true },
      header_check: {
        passed: false,
        message: '1 header of the header filter fails: x-github-event',
        headers: [
          {
            path: 'x-github-event',
            passed: false,
            actual: 'pull_request',
            mismatches: [{ condition: 'in', expected: ['push'], actual: 'pull_request' }],
          },
        ],
      },
    });
    const credential = await t.call('POST', `/api/v1/webhooks/${hook.uid}/test-filter`, {
      filter: { headers: { Authorization: { exists: true } } },
    });
    expect(credential.status).toBe(400);
    expect(credential.body.invalid_params).toEqual([
      { name: 'filter.headers.authorization', reason: expect.stringContaining('credential') },
    ]);
  });
});

describe('replay', () => {
  it('re-evaluates an Accepted delivery against today’s automations: a Replayed entry linked both ways, and the runs it starts', async () => {
    const hook = await createWebhook(t, factory);
    const sent = await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"level":"error"}', {
      ...bearer(hook.secret),
      'X-GitHub-Event': 'push',
    });
    expect(sent.status).toBe(202);
    const [original] = (await entries(hook)).body.deliveries;
    expect((await entry(hook, original.id)).body.runs).toEqual([]); // no automation yet

    // Today's automation: added after the delivery arrived.
    await automation(`errors-${hook.uid}`, hook.uid, {
      payload: { level: ['error'] },
      headers: { 'x-github-event': ['push'] },
    });
    const replayed = await t.call('POST', `/api/v1/webhooks/${hook.uid}/deliveries/${original.id}/replay`);
    expect(replayed.status).toBe(201);
    expect(replayed.body).toMatchObject({
      status: 'replayed',
      replay_of: original.id,
      delivery_id: sent.body.delivery_id,
      payload: { level: 'error' },
      headers: { 'x-github-event': 'push' },
      client_address: null,
      runs: [{ run_id: expect.any(String), state: 'QUEUED' }],
    });
    expect(replayed.body.id).not.toBe(original.id);

    const run = await t.call('GET', `/api/v1/agent/runs/${replayed.body.runs[0].run_id}`);
    expect(run.body.prompt).toContain('It is a replay');
    expect(run.body.metadata).toMatchObject({
      webhook_delivery_entry: replayed.body.id,
      webhook_replay_of: original.id,
    });

    // Each request makes a new entry.
    const again = await t.call('POST', `/api/v1/webhooks/${hook.uid}/deliveries/${original.id}/replay`);
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(replayed.body.id);
    expect((await entry(hook, original.id)).body).toMatchObject({
      status: 'accepted',
      replayed_as: [replayed.body.id, again.body.id],
      runs: [],
    });
    const listed = (await entries(hook)).body.deliveries;
    expect(listed.map((d: { status: string }) => d.status)).toEqual(['replayed', 'replayed', 'accepted']);
    expect(listed[0].replay_of).toBe(original.id);
  });

  it('refuses what it cannot replay: a non-Accepted entry (400), an unknown entry (404), a disabled webhook (409)', async () => {
    const hook = await createWebhook(t, factory);
    await deliver(t.url, `/webhooks/w/${hook.uid}`, '{', bearer(hook.secret));
    const [invalid] = (await entries(hook)).body.deliveries;
    const notAccepted = await t.call('POST', `/api/v1/webhooks/${hook.uid}/deliveries/${invalid.id}/replay`);
    expect(notAccepted.status).toBe(400);
    expect(notAccepted.body.detail).toContain('only Accepted deliveries can be replayed');
    const unknown = await t.call(
      'POST',
      `/api/v1/webhooks/${hook.uid}/deliveries/00000000-0000-4000-8000-000000000000/replay`,
    );
    expect(unknown.status).toBe(404);

    const disabled = await createWebhook(t, factory);
    await deliver(t.url, `/webhooks/w/${disabled.uid}`, '{}', bearer(disabled.secret));
    const [accepted] = (await entries(disabled)).body.deliveries;
    await updateWebhook(t, factory, disabled, { enabled: false });
    const off = await t.call('POST', `/api/v1/webhooks/${disabled.uid}/deliveries/${accepted.id}/replay`);
    expect(off.status).toBe(409);
    expect(off.body.detail).toContain('enable it to replay');
  });

  it('needs factory:manage, and another team’s key gets 404 for replay and the log', async () => {
    const hook = await createWebhook(t, factory);
    await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"secret":"ours"}', bearer(hook.secret));
    const [original] = (await entries(hook)).body.deliveries;
    const replayPath = `/api/v1/webhooks/${hook.uid}/deliveries/${original.id}/replay`;

    const reader = await t.call('POST', replayPath, undefined, readerKey);
    expect(reader.status).toBe(403);
    expect(reader.body.detail).toContain('factory:manage');

    for (const [method, path] of [
      ['POST', replayPath],
      ['GET', `/api/v1/webhooks/${hook.uid}/deliveries`],
      [
        'GET',
        `/api/v1/webhooks/${hook.uid}/deliveries?payload_contains=${encodeURIComponent('{"secret":"ours"}')}`,
      ],
      ['GET', `/api/v1/webhooks/${hook.uid}/deliveries/${original.id}`],
    ] as const) {
      const res = await t.call(method, path, undefined, other.key);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error).toBe('resource_not_found');
    }
    expect((await entries(hook)).body.deliveries).toHaveLength(1); // nothing was replayed
  });
});

describe('searching the delivery log', () => {
  it('by status, time range, delivery id and payload containment, ANDed, with cursors bound to the filters', async () => {
    const hook = await createWebhook(t, factory);
    const path = `/webhooks/w/${hook.uid}`;
    const send = (body: unknown, id: string) =>
      deliver(t.url, path, JSON.stringify(body), { ...bearer(hook.secret), 'X-Service-Delivery-Id': id });
    await send({ level: 'info', job: 'build' }, 'd-1');
    await send({ level: 'error', job: 'build', labels: ['bug', 'ci'] }, 'd-2');
    const [{ received_at: middle }] = (await entries(hook)).body.deliveries;
    await send({ level: 'error', job: 'deploy', sender: { type: 'Bot' } }, 'd-3');
    await send({ level: 'error', job: 'deploy' }, 'd-3'); // a Duplicate keeps no payload
    await deliver(t.url, path, '{', bearer(hook.secret));

    const search = async (params: Record<string, string>) => {
      const res = await t.call(
        'GET',
        `/api/v1/webhooks/${hook.uid}/deliveries?${new URLSearchParams(params)}`,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.deliveries.map(
        (d: { delivery_id: string; status: string }) => `${d.delivery_id}:${d.status}`,
      );
    };
    expect(await search({ payload_contains: '{"level":"error"}' })).toEqual(['d-3:accepted', 'd-2:accepted']);
    expect(await search({ payload_contains: '{"sender":{"type":"Bot"}}' })).toEqual(['d-3:accepted']);
    expect(await search({ payload_contains: '{"labels":["ci"]}' })).toEqual(['d-2:accepted']);
    expect(await search({ payload_contains: '{"level":"warn"}' })).toEqual([]);
    expect(await search({ delivery_id: 'd-3' })).toEqual(['d-3:duplicate', 'd-3:accepted']);
    expect(await search({ status: 'duplicate' })).toEqual(['d-3:duplicate']);
    expect(await search({ received_before: middle })).toEqual(['d-1:accepted']);
    expect(await search({ received_after: middle, payload_contains: '{"job":"build"}' })).toEqual([
      'd-2:accepted',
    ]);

    const page1 = await t.call(
      'GET',
      `/api/v1/webhooks/${hook.uid}/deliveries?limit=1&payload_contains=${encodeURIComponent('{"level":"error"}')}`,
    );
    expect(page1.body.page_info.has_next_page).toBe(true);
    const page2 = await t.call(
      'GET',
      `/api/v1/webhooks/${hook.uid}/deliveries?limit=1&cursor=${page1.body.page_info.next_cursor}&payload_contains=${encodeURIComponent('{"level":"error"}')}`,
    );
    expect(page2.body.deliveries.map((d: { delivery_id: string }) => d.delivery_id)).toEqual(['d-2']);
    const otherFilters = await t.call(
      'GET',
      `/api/v1/webhooks/${hook.uid}/deliveries?limit=1&cursor=${page1.body.page_info.next_cursor}`,
    );
    expect(otherFilters.status).toBe(400);
  });

  it('bad search values are 400 naming the parameter', async () => {
    const hook = await createWebhook(t, factory);
    for (const [query, name] of [
      ['status=lost', 'status'],
      ['received_after=yesterday', 'received_after'],
      ['received_before=2026-13-01', 'received_before'],
      ['payload_contains=level', 'payload_contains'],
      ['payload_contains=42', 'payload_contains'],
      [`payload_contains=${encodeURIComponent('{"a":"\\u0000"}')}`, 'payload_contains'],
    ]) {
      const res = await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body.invalid_params?.[0]?.name, query).toBe(name);
    }
  });
});
