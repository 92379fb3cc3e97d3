import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './support/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

describe('POST /api/v1/agent/runs', () => {
  it('creates a QUEUED run and returns run_id, task_id, state with 200', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Fix the flaky test',
      metadata: { ci: 'yes' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ run_id: expect.any(String), task_id: res.body.run_id, state: 'QUEUED' });
    const got = await t.call('GET', `/api/v1/agent/runs/${res.body.run_id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      run_id: res.body.run_id,
      prompt: 'Fix the flaky test',
      state: 'QUEUED',
      source: 'API',
      metadata: { ci: 'yes' },
    });
  });

  it('answers a body that is not JSON with a problem+json 400', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', '{bad');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 400, error: 'invalid_request' });
  });
});
