import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFactory, createWebhook, type WebhookFixture } from '../support/definitions.js';
import { rawRequest } from '../support/raw-http.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Malformed requests across the Run API, the management API and the ingress (bodies, headers, query
 * strings, paths), on real sockets: whatever comes in, the answer is never a 5xx. The ingress's
 * delivery-log accounting under fuzzing is test/webhook-fuzz.test.ts.
 */
let t: TestService;
let port: number;
let hook: WebhookFixture;
let ids: { run: string; factory: string; webhook: string };
beforeAll(async () => {
  t = await startTestService({ WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000' });
  port = Number(new URL(t.url).port);
  const factory = await createFactory(t);
  hook = await createWebhook(t, factory);
  const run = await t.call('POST', '/api/v1/agent/runs', { prompt: 'fuzz target', metadata: { k: 'v' } });
  ids = { run: run.body.run_id, factory: factory.uid, webhook: hook.uid };
});
afterAll(async () => t?.stop());

/** Strings that have broken parsers and databases: NUL, lone surrogates, prototype names, escapes. */
const nasty = fc.oneof(
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udc00',
    '__proto__',
    'constructor',
    'toString',
    '',
    ' ',
    '%',
    '%00',
    '%ZZ',
    "'; DROP TABLE runs; --",
    '\\',
    '"',
    '💥',
    'é'.repeat(200),
    'x'.repeat(5000),
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.string({ unit: fc.constantFrom('\u0000', '\ud800', '\udfff', 'a', '"', '[', '{', '%'), maxLength: 12 }),
);

/** Percent-encodes UTF-8 (a lone surrogate goes out as U+FFFD, as any client would send it). */
const encode = (s: string) =>
  [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

const segment = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('RUN', 'FACTORY', 'WEBHOOK') },
  { weight: 2, arbitrary: nasty.map(encode) },
  { weight: 1, arbitrary: fc.constantFrom('%00', '%ZZ', '..', '%2e%2e', 'a%2Fb', '%E2%82') },
);

/** Mostly absent: present one time in `every`. */
const sometimes = <T>(values: T[], every: number) =>
  fc.oneof(
    { weight: every - 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.constantFrom(...values) },
  );

const KEYS = [
  'q',
  'creator',
  'name',
  'model_id',
  'state',
  'limit',
  'cursor',
  'sort_by',
  'sort_order',
  'source',
  'skill',
  'environment_id',
  'created_after',
  'metadata[k]',
  'metadata[constructor]',
  'metadata[__proto__]',
  'metadata[toString]',
  'search',
  'status',
  'include_deleted',
];
/** A cursor as the server makes them (base64url JSON), holding what it never would. */
const forgedCursor = fc
  .tuple(
    fc.constantFrom(
      'deliveries:',
      'factories:name',
      'factory-applies',
      'runs:updated_at:desc',
      'runs:title:asc',
    ),
    fc.oneof(
      nasty,
      fc.integer(),
      fc.constant(null),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
    ),
    fc.oneof(nasty, fc.uuid()),
  )
  .map((parts) => Buffer.from(JSON.stringify(parts)).toString('base64url'));

const query = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom(...KEYS).map(encodeKey), nasty.map(encode)),
      fc.oneof(
        nasty.map(encode),
        fc.constantFrom('%', '%ZZ', '1', '0', '-1', '501', 'QUEUED,BAD'),
        forgedCursor,
      ),
    ),
    { maxLength: 4 },
  )
  .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));

function encodeKey(key: string): string {
  return key.replace('[', '%5B').replace(']', '%5D');
}

/** JSON values with nasty strings as keys and values, sometimes nested deep. */
const { value: jsonValue } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    nasty,
    fc.integer(),
    fc.constantFrom(null, true, 1e308, -0),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(nasty, tie('value'), { maxKeys: 4 }),
  ),
}));

const FIELDS = [
  'prompt',
  'title',
  'config',
  'metadata',
  'message',
  'mode',
  'name',
  'filter',
  'delivery',
  'secret',
];
const body = fc.oneof(
  fc.constant(''),
  fc.constantFrom('{', '[', '{"prompt":', 'null', '"x"', '1', '\ufeff{}', '{"__proto__":{"x":1}}'),
  fc.dictionary(fc.constantFrom(...FIELDS), jsonValue, { maxKeys: 4 }).map((v) => JSON.stringify(v)),
  jsonValue.map((v) => JSON.stringify(v)),
  fc.integer({ min: 1, max: 3000 }).map((n) => `{"prompt":"x","metadata":${'['.repeat(n)}${']'.repeat(n)}}`),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1')),
);

const ROUTES: Array<[string, string]> = [
  ['POST', '/api/v1/agent/runs'],
  ['POST', '/api/v1/agent/run'],
  ['GET', '/api/v1/agent/runs'],
  ['GET', '/api/v1/agent/runs/:seg'],
  ['POST', '/api/v1/agent/runs/:seg/followups'],
  ['POST', '/api/v1/agent/runs/:seg/cancel'],
  ['GET', '/api/v1/agent/runs/:seg/conversation'],
  ['GET', '/api/v1/factory'],
  ['GET', '/api/v1/factory/:seg'],
  ['POST', '/api/v1/factory/:seg/runs'],
  ['GET', '/api/v1/factory/:seg/applies'],
  ['GET', '/api/v1/factory/:seg/webhooks'],
  ['POST', '/api/v1/factory/:seg/webhooks'],
  ['GET', '/api/v1/webhooks/:seg'],
  ['PATCH', '/api/v1/webhooks/:seg'],
  ['POST', '/api/v1/webhooks/:seg/enable'],
  ['POST', '/api/v1/webhooks/:seg/secret'],
  ['POST', '/api/v1/webhooks/:seg/test-filter'],
  ['GET', '/api/v1/webhooks/:seg/deliveries'],
  ['GET', '/api/v1/webhooks/:seg/deliveries/:seg'],
  ['POST', '/webhooks/w/:seg'],
  ['POST', '/webhooks/w/:seg/:seg'],
];

const request = fc.record({
  route: fc.constantFrom(...ROUTES),
  method: sometimes(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'], 10),
  segments: fc.array(segment, { minLength: 2, maxLength: 2 }),
  query,
  body,
  auth: fc.constantFrom('admin', 'admin', 'admin', 'admin', 'admin', 'none', 'garbage', 'hook'),
  contentType: fc.option(
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'text/plain',
      'application/x-www-form-urlencoded',
      'garbage/;;;',
    ),
    { freq: 5 },
  ),
  team: sometimes(['x', '%00', 'AAAAAAAAAAAAAAAAAAAAAA'], 10),
});
type FuzzRequest = typeof request extends fc.Arbitrary<infer R> ? R : never;

function raw(r: FuzzRequest): (string | Buffer)[] {
  const real: Record<string, string> = { RUN: ids.run, FACTORY: ids.factory, WEBHOOK: ids.webhook };
  let i = 0;
  const path = r.route[1].replace(/:seg/g, () => {
    const s = r.segments[i++]!;
    return real[s] ?? s;
  });
  const payload = Buffer.from(r.body, 'utf8');
  const headers = ['Host: 127.0.0.1', 'Connection: close', `Content-Length: ${payload.length}`];
  if (r.contentType) headers.push(`Content-Type: ${r.contentType}`);
  const key = { admin: t.adminKey, garbage: 'fd_nonsense', hook: hook.secret, none: undefined }[r.auth];
  if (key) headers.push(`Authorization: Bearer ${key}`);
  if (r.team) headers.push(`X-Team-Uid: ${r.team}`);
  return [`${r.method ?? r.route[0]} ${path}${r.query} HTTP/1.1\r\n${headers.join('\r\n')}\r\n\r\n`, payload];
}

describe('2,000 malformed requests across the Run API, management and ingress', () => {
  it('never get a 5xx', async () => {
    let sent = 0;
    const statuses = new Map<number | undefined, number>();
    await fc.assert(
      fc.asyncProperty(fc.array(request, { minLength: 50, maxLength: 50 }), async (batch) => {
        const answers = await Promise.all(batch.map((r) => rawRequest(port, raw(r), { timeoutMs: 20_000 })));
        sent += batch.length;
        for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        const bad = answers.findIndex((a) => a.status === undefined || a.status >= 500);
        if (bad >= 0)
          throw new Error(`${answers[bad]!.text.slice(0, 600)}\nfor ${JSON.stringify(raw(batch[bad]!)[0])}`);
      }),
      { numRuns: 40, seed: 20261124, endOnFailure: true },
    );
    console.info(`sent ${sent}; statuses: ${JSON.stringify(Object.fromEntries(statuses))}`);
    expect(sent).toBeGreaterThanOrEqual(2000);
  }, 300_000);
});
