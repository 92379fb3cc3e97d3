import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { rawRequest, trickle, type Trickle } from '../support/raw-http.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Issue #14, item 4: bodies were read before authentication, and a trickling body held its
 * connection for ever. The service runs in this process, so its memory is this process's.
 */
let t: TestService;
let port: number;
beforeAll(async () => {
  t = await startTestService();
  port = Number(new URL(t.url).port);
});
afterAll(async () => t?.stop());

const MiB = 1024 * 1024;

describe('unauthenticated bodies', () => {
  it('100 concurrent 16 MB POST /agent/runs without a key all get 401, and their bodies are not buffered', async () => {
    const body = Buffer.alloc(16 * MiB, 0x20); // one buffer, shared by every client: not ours to count
    const head = [
      'POST /api/v1/agent/runs HTTP/1.1',
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      `Content-Length: ${body.length}`,
      '',
      '',
    ].join('\r\n');
    const before = process.memoryUsage();
    // Buffers the server holds show in `arrayBuffers` (external memory): sample its peak meanwhile.
    let peakBuffers = before.arrayBuffers;
    let peakRss = before.rss;
    const sampler = setInterval(() => {
      const now = process.memoryUsage();
      peakBuffers = Math.max(peakBuffers, now.arrayBuffers);
      peakRss = Math.max(peakRss, now.rss);
    }, 5);
    const responses = await Promise.all(
      Array.from({ length: 100 }, () => rawRequest(port, [head, body], { timeoutMs: 60_000 })),
    );
    clearInterval(sampler);
    const after = process.memoryUsage();
    const mb = (n: number) => `${(n / MiB).toFixed(0)} MB`;
    console.info(
      `100 × 16 MB unauthenticated: RSS ${mb(before.rss)} before, peak ${mb(peakRss)}, ${mb(after.rss)} after; ` +
        `Buffers ${mb(before.arrayBuffers)} before, peak ${mb(peakBuffers)} (1,600 MB were sent)`,
    );

    expect(responses.map((r) => r.status)).toEqual(Array(100).fill(401));
    expect(responses[0]!.text).toContain('application/problem+json');
    expect(responses[0]!.text).toContain('"error":"authentication_required"');
    // Each refused request is drained by at most 1 MiB before the answer (and then closed): the
    // bound is generous (a quarter of what was sent) and far below reading the bodies (1,600 MB).
    expect(peakBuffers - before.arrayBuffers).toBeLessThan(400 * MiB);
    // The service still answers at once.
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
  }, 120_000);
});

describe('trickling bodies are cut by the request timeout', () => {
  // Short timeouts, so a trickling client is cut within seconds.
  let slow: TestService;
  let slowPort: number;
  beforeAll(async () => {
    slow = await startTestService({ HTTP_REQUEST_TIMEOUT_MS: '2000', HTTP_HEADERS_TIMEOUT_MS: '1000' });
    slowPort = Number(new URL(slow.url).port);
  });
  afterAll(async () => slow?.stop());
  const head = (key?: string) =>
    [
      'POST /api/v1/agent/runs HTTP/1.1',
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      'Content-Length: 100000',
      ...(key ? [`Authorization: Bearer ${key}`] : []),
      '',
      '',
    ].join('\r\n');
  let open: Trickle | undefined;
  afterAll(() => open?.stop());

  it('without a key: 401, and the connection closes', async () => {
    open = trickle(slowPort, head(), { everyMs: 100 });
    await eventually(() => open!.closed(), 'the server to close the trickling connection');
    expect(open.response().status).toBe(401);
  });

  it('with a valid key: 408, and the connection closes', async () => {
    open = trickle(slowPort, head(slow.adminKey), { everyMs: 100 });
    await eventually(() => open!.closed(), 'the server to close the trickling connection');
    expect(open.response().status).toBe(408);
    expect(open.sent()).toBeGreaterThan(0);
  });
});

describe('body limits', () => {
  it('a management body over 64 KiB is a 413 naming the limit', async () => {
    const res = await t.call('POST', '/api/v1/webhooks/AAAAAAAAAAAAAAAAAAAAAA/test-filter', {
      filter: { payload: { x: 'y'.repeat(70_000) } },
    });
    expect(res.status).toBe(413);
    expect(res.body).toMatchObject({ error: 'payload_too_large' });
    expect(res.body.detail).toContain('65536 bytes');
  });

  it('a run over 16 MiB is a 413 naming the limit, before its body is read', async () => {
    const res = await rawRequest(port, [
      [
        'POST /api/v1/agent/runs HTTP/1.1',
        'Host: 127.0.0.1',
        'Content-Type: application/json',
        `Content-Length: ${16 * MiB + 1}`,
        `Authorization: Bearer ${t.adminKey}`,
        '',
        '',
      ].join('\r\n'),
    ]);
    expect(res.status).toBe(413);
    expect(res.text).toContain(`${16 * MiB} bytes`);
  });
});

describe('an empty body with a JSON content type is an empty object', () => {
  it('the Python client’s cancel (content-type: application/json, no body) cancels the run', async () => {
    const created = await t.call('POST', '/api/v1/agent/runs', { prompt: 'to cancel' });
    expect(created.status).toBe(200);
    const runId = created.body.run_id as string;
    // What oz-agent-sdk for Python sends for runs.cancel(run_id): a JSON content type and no body.
    const res = await fetch(`${t.api}/agent/runs/${runId}/cancel`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${t.adminKey}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'user-agent': 'OzAPI/Python 1.0.0a8',
      },
      body: '',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toBe(runId);
  });

  it('an empty JSON body where one is required is a 400 naming what is missing', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', '');
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/prompt/);
  });
});
