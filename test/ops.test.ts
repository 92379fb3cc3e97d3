import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './support/service.js';

/** /healthz, /readyz and /metrics: public, and honest about the database. */
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

describe('operations endpoints', () => {
  it('answers /healthz without a key', async () => {
    const res = await t.call('GET', '/healthz', undefined, '');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('is ready when migrations are applied, and 503 with Retry-After when one is pending', async () => {
    expect((await t.call('GET', '/readyz', undefined, '')).body).toEqual({ status: 'ready' });
    const [last] = await t.service.db.query<{ id: number; timestamp: string; name: string }>(
      `SELECT id, timestamp, name FROM schema_migrations ORDER BY id DESC LIMIT 1`,
    );
    await t.service.db.execute(`DELETE FROM schema_migrations WHERE id = $1`, [last.id]);
    try {
      const res = await t.call('GET', '/readyz', undefined, '');
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(res.body).toMatchObject({
        error: 'service_unavailable',
        detail: 'Database migrations are pending.',
      });
    } finally {
      await t.service.db.execute(`INSERT INTO schema_migrations (id, timestamp, name) VALUES ($1, $2, $3)`, [
        last.id,
        last.timestamp,
        last.name,
      ]);
    }
    expect((await t.call('GET', '/readyz', undefined, '')).status).toBe(200);
  });

  it('exports Prometheus metrics with request durations by route pattern', async () => {
    await t.call('GET', '/api/v1/agent/runs');
    await t.call('GET', '/api/v1/agent/runs/00000000-0000-4000-8000-000000000000');
    const res = await fetch(`${t.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(
      /factoryd_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/agent\/runs",status="200"\} [1-9]/,
    );
    expect(text).toMatch(
      /factoryd_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/agent\/runs\/:runId",status="404"\} [1-9]/,
    );
    expect(text).not.toContain('00000000-0000-4000-8000-000000000000');
    expect(text).toContain('factoryd_process_cpu_seconds_total');
  });
});
