import { deliveriesScope } from '../../src/webhooks/delivery-log.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createFactory,
  createWebhook,
  deliveriesOf,
  type FactoryFixture,
  type WebhookFixture,
} from '../support/definitions.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Issue #14, item 5: input PostgreSQL cannot store (NUL, lone surrogates) answered 500, a delivery
 * nested 20,000 deep broke its detail and Test filter, and `metadata[constructor]` / `__proto__`
 * were misread. Each is now a 400 naming the field, or ordinary data.
 */
let t: TestService;
let factory: FactoryFixture;
let hook: WebhookFixture;
let runId: string;
beforeAll(async () => {
  t = await startTestService();
  factory = await createFactory(t);
  hook = await createWebhook(t, factory);
  runId = (await t.call('POST', '/api/v1/agent/runs', { prompt: 'a run to follow up' })).body.run_id;
});
afterAll(async () => t?.stop());

/** A 400 invalid_request whose invalid_params name `field`, with a message that says what is wrong. */
function expectNamed(res: { status: number; body: any }, field: string, what: RegExp) {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body.error).toBe('invalid_request');
  expect(res.body.invalid_params).toEqual([{ name: field, reason: expect.stringMatching(what) }]);
}

describe('NUL in a body is a 400 naming the field', () => {
  it.each([
    ['prompt', { prompt: 'fix\u0000it' }],
    ['config.name', { prompt: 'x', config: { name: 'bot\u0000' } }],
    ['title', { prompt: 'x', title: '\u0000' }],
    ['metadata.owner', { prompt: 'x', metadata: { owner: 'a\u0000b' } }],
  ])('POST /agent/runs with NUL in %s', async (field, body) => {
    expectNamed(await t.call('POST', '/api/v1/agent/runs', body), field, /NUL/);
  });

  it('a metadata key with NUL', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', { prompt: 'x', metadata: { 'a\u0000': 'b' } });
    expectNamed(res, 'metadata', /key .*NUL/);
  });

  it('a follow-up message with NUL', async () => {
    const res = await t.call('POST', `/api/v1/agent/runs/${runId}/followups`, { message: 'more\u0000' });
    expectNamed(res, 'message', /NUL/);
  });

  it('a lone surrogate (\\ud800) in a prompt', async () => {
    // Written as the JSON escape, as a client would send it: JSON.stringify would do the same.
    const res = await t.call('POST', '/api/v1/agent/runs', '{"prompt":"half \\ud800 a pair"}');
    expectNamed(res, 'prompt', /surrogate/);
  });

  it('a factory dispatch prompt with NUL', async () => {
    const res = await t.call('POST', `/api/v1/factory/${factory.uid}/runs`, { prompt: 'go\u0000' });
    expectNamed(res, 'prompt', /NUL/);
  });
});

describe('NUL in a query string or path is a 400 naming the parameter', () => {
  it.each([
    ['q', '/api/v1/agent/runs?q=%00'],
    ['creator', '/api/v1/agent/runs?creator=%00'],
    ['name', '/api/v1/agent/runs?name=a%00b'],
    ['metadata[owner]', '/api/v1/agent/runs?metadata[owner]=%00'],
    ['search', '/api/v1/factory?search=%00'],
    ['status', `/api/v1/webhooks/AAAAAAAAAAAAAAAAAAAAAA/deliveries?status=%00`],
  ])('%s', async (field, path) => {
    expectNamed(await t.call('GET', path), field, /NUL/);
  });

  it('a factory uid with NUL', async () => {
    expectNamed(await t.call('GET', '/api/v1/factory/%00'), 'uid', /path parameter uid .*NUL/);
  });
});

describe('deep JSON', () => {
  const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
  const deliver = (body: string) =>
    fetch(`${t.url}/webhooks/w/${hook.uid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${hook.secret}`, 'content-type': 'application/json' },
      body,
    });

  it('a delivery nested 20,000 deep is Rejected (invalid JSON) with a message naming the depth', async () => {
    const res = await deliver(nested(20_000));
    expect(res.status).toBe(400);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/nested more than 512 levels/);
    const [entry] = await deliveriesOf(t.service.db, hook.id);
    expect(entry!.status).toBe('rejected_invalid_json');
    // Its detail and Test filter answer, without a payload to recurse into.
    const detail = await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries/${entry!.id}`);
    expect(detail.status).toBe(200);
    expect(detail.body).not.toHaveProperty('payload');
    const tested = await t.call('POST', `/api/v1/webhooks/${hook.uid}/test-filter`, {
      delivery: entry!.id,
      filter: { payload: { a: 'b' } },
    });
    expect(tested.status).toBe(400);
  });

  it('512 levels are accepted, and served back by the detail and Test filter', async () => {
    const res = await deliver(`{"a":${nested(511)}}`);
    expect(res.status).toBe(202);
    const [entry] = (await deliveriesOf(t.service.db, hook.id)).filter((e) => e.status === 'accepted');
    const detail = await t.call('GET', `/api/v1/webhooks/${hook.uid}/deliveries/${entry!.id}`);
    expect(detail.status).toBe(200);
    expect(JSON.stringify(detail.body.payload)).toBe(`{"a":${nested(511)}}`);
    const tested = await t.call('POST', `/api/v1/webhooks/${hook.uid}/test-filter`, {
      delivery: entry!.id,
      filter: { payload: { a: { exists: true } } },
    });
    expect(tested.status).toBe(200);
  });

  it('an API body nested past 512 is a 400 naming where', async () => {
    const res = await t.call(
      'POST',
      '/api/v1/agent/runs',
      `{"prompt":"x","config":{"mcp_servers":${nested(600)}}}`,
    );
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/^config\.mcp_servers(\.0)* is nested more than 512 levels/);
  });
});

describe('constructor and __proto__ are ordinary keys', () => {
  it('metadata[constructor]=x filters by the key "constructor"', async () => {
    const made = await t.call('POST', '/api/v1/agent/runs', { prompt: 'c', metadata: { constructor: 'x' } });
    expect(made.status).toBe(200);
    const res = await t.call('GET', '/api/v1/agent/runs?metadata[constructor]=x');
    expect(res.status).toBe(200);
    expect(res.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([made.body.run_id]);
  });

  it('a body with a metadata key __proto__ is stored as data, and metadata[__proto__] finds it', async () => {
    // A raw body: in a JavaScript object literal `__proto__` would set the prototype instead.
    const made = await t.call('POST', '/api/v1/agent/runs', '{"prompt":"p","metadata":{"__proto__":"x"}}');
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const run = await t.call('GET', `/api/v1/agent/runs/${made.body.run_id}`);
    expect(Object.entries(run.body.metadata)).toEqual([['__proto__', 'x']]);
    const found = await t.call('GET', '/api/v1/agent/runs?metadata[__proto__]=x');
    expect(found.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([made.body.run_id]);
    const none = await t.call('GET', '/api/v1/agent/runs?metadata[__proto__]=y');
    expect(none.body.runs).toEqual([]);
  });

  it('a __proto__ key where no such field exists is named as an unknown field', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', '{"prompt":"p","__proto__":{"admin":true}}');
    expectNamed(res, '', /__proto__ is not a known field/);
  });
});

describe('forged cursors are a 400, never a database error', () => {
  const forge = (...parts: unknown[]) => Buffer.from(JSON.stringify(parts)).toString('base64url');
  const uuid = '00000000-0000-4000-8000-000000000000';
  it.each([
    [
      'a delivery log page at a time that is no time',
      () => `/api/v1/webhooks/${hook.uid}/deliveries?cursor=${forge(deliveriesScope({}), 'soon', uuid)}`,
    ],
    [
      'an applies page at a time that is no time',
      () =>
        `/api/v1/factory/${factory.uid}/applies?cursor=${forge('factory-applies', '2026-02-30T00:00:00.000Z', uuid)}`,
    ],
    [
      'a factory page after an id that is no UUID',
      () => `/api/v1/factory?cursor=${forge('factories:name', 'a', 'no-uuid')}`,
    ],
    [
      'a factory page after a name with NUL',
      () => `/api/v1/factory?cursor=${forge('factories:name', 'a\u0000', uuid)}`,
    ],
  ])('%s', async (_what, path) => {
    expectNamed(await t.call('GET', path()), 'cursor', /not a cursor issued by this server/);
  });
});
