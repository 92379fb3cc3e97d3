import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { whileLocked } from './support/database.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { createAutomation, createFactory, createWebhook, deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { NotificationReceiver } from './support/notification-receiver.js';
import { runIn, startTestService, type TestService } from './support/service.js';

// A real service with one service-hosted worker slot (the example harness), a factory applied from a
// git repository, a webhook that starts a run, a notification receiver on loopback and a self-hosted
// worker that claims a run and goes silent: /metrics shows each of them move.
let t: TestService;
const receiver = new NotificationReceiver();
// 2 s leases: a silent worker's run is reaped soon. No polls: the test applies each commit itself.
const ENV = { WORKER_CONCURRENCY: '1', WORKER_LEASE_SECONDS: '2', FACTORY_POLL_SECONDS: '3600' };
beforeAll(async () => {
  t = await startTestService({ ...ENV, NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true' });
});
afterAll(async () => {
  await receiver.stop();
  await t?.stop();
});

type Samples = (name: string, labels?: Record<string, string>) => number | undefined;

/** GET /metrics, as Prometheus reads it: each sample by its name and its exact labels. */
async function scrape(): Promise<Samples & { text: string }> {
  const res = await fetch(`${t.url}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = [...(m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map(([, k, v]) => `${k}=${v}`);
    samples.set(`${m[1]}{${labels.sort().join(',')}}`, Number(m[3]));
  }
  const get = (name: string, labels: Record<string, string> = {}) =>
    samples.get(
      `${name}{${Object.entries(labels)
        .map(([k, v]) => `${k}=${v}`)
        .sort()
        .join(',')}}`,
    );
  return Object.assign(get, { text });
}

/** How far a counter moved from `before` (a counter not yet exported counts as 0). */
const moved = (before: Samples, after: Samples, name: string, labels?: Record<string, string>) =>
  (after(name, labels) ?? 0) - (before(name, labels) ?? 0);

describe('/metrics', () => {
  it('counts the reconciles, deliveries, claims, harness starts and notification attempts a webhook run makes', async () => {
    const before = await scrape();
    const endpoint = await t.call('POST', '/api/v1/notifications/endpoints', {
      name: 'metrics',
      url: await receiver.start(),
      event_types: ['run.succeeded'],
    });
    expect(endpoint.status).toBe(201);
    const factory = await createFactory(t);
    const hook = await createWebhook(t, factory, { deliveryIdHeader: 'x-delivery' });
    await createAutomation(t, factory, { name: 'triage', webhookUid: hook.uid });

    const headers = { authorization: `Bearer ${hook.secret}`, 'x-delivery': 'd-1' };
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"n":1}', headers)).status).toBe(202);
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{"n":1}', headers)).status).toBe(202);
    const wrong = { authorization: 'Bearer not-the-secret' };
    expect((await deliver(t.url, `/webhooks/w/${hook.uid}`, '{}', wrong)).status).toBe(401);

    const after = await eventually(async () => {
      const now = await scrape();
      expect(moved(before, now, 'factoryd_notification_attempts_total', { outcome: 'delivered' })).toBe(1);
      return now;
    }, 'the run succeeded and its notification was delivered');
    const runs = (await t.call('GET', '/api/v1/agent/runs')).body.runs;
    expect(runs.map((r: any) => r.state)).toEqual(['SUCCEEDED']);

    // Three commits applied (the factory, its webhook, its automation); polls that found nothing new are noops.
    expect(moved(before, after, 'factoryd_reconciles_total', { result: 'applied' })).toBe(3);
    expect(after('factoryd_reconciles_total', { result: 'failed', reason: 'FetchFailed' })).toBeUndefined();
    for (const [status, n] of [
      ['accepted', 1],
      ['duplicate', 1],
      ['rejected_auth', 1],
    ] as const)
      expect(moved(before, after, 'factoryd_webhook_deliveries_total', { status })).toBe(n);
    expect(moved(before, after, 'factoryd_runs_claimed_total', { workers: 'service' })).toBe(1);
    expect(moved(before, after, 'factoryd_run_claim_wait_seconds_count', { workers: 'service' })).toBe(1);
    expect(after('factoryd_run_claim_wait_seconds_sum', { workers: 'service' })).toBeGreaterThan(0);
    expect(moved(before, after, 'factoryd_harness_starts_total', { harness: 'oz', outcome: 'started' })).toBe(
      1,
    );
    // No run or webhook id in any label.
    expect(after.text).not.toContain(runs[0].run_id);
    expect(after.text).not.toContain(hook.uid);
  });

  it("shows the queue's depth by state, and counts the runs the reaper takes from a silent worker", async () => {
    const before = await scrape();
    expect(before('factoryd_metrics_database_up')).toBe(1);
    expect(before('factoryd_runs', { state: 'QUEUED', workers: 'self_hosted' })).toBe(0);
    expect(before('factoryd_runs_overdue', { reason: 'lease_lapsed' })).toBe(0);

    const runId = (
      await t.call('POST', '/api/v1/agent/runs', { prompt: 'On my box', config: { worker_host: 'box-m' } })
    ).body.run_id;
    const queued = await scrape();
    expect(queued('factoryd_runs', { state: 'QUEUED', workers: 'self_hosted' })).toBe(1);
    expect(queued('factoryd_runs', { state: 'QUEUED', workers: 'service' })).toBe(0);

    // A self-hosted worker claims it and never reports again: its lease lapses, the reaper ends the run.
    const claimed = await t.call(
      'POST',
      '/api/v1/agent/workers/claim',
      { worker_id: 'm1', worker_host: 'box-m' },
      await t.workerKey('box-m'),
    );
    expect(claimed.body.runs.map((r: any) => r.run_id)).toEqual([runId]);
    const held = await scrape();
    expect(moved(before, held, 'factoryd_runs_claimed_total', { workers: 'self_hosted' })).toBe(1);
    expect(held('factoryd_runs', { state: 'QUEUED', workers: 'self_hosted' })).toBe(0);
    expect(held('factoryd_runs', { state: 'CLAIMED', workers: 'self_hosted' })).toBe(1);

    await runIn(t, runId, ['ERROR']);
    const reaped = await scrape();
    expect(moved(before, reaped, 'factoryd_runs_reaped_total', { reason: 'lease_lapsed' })).toBe(1);
    expect(reaped('factoryd_runs', { state: 'CLAIMED', workers: 'self_hosted' })).toBe(0);
    expect(reaped('factoryd_runs_overdue', { reason: 'lease_lapsed' })).toBe(0);
  });

  it('answers within seconds while the database hangs: the counters, the depths absent', async () => {
    const answered = await whileLocked(t.databaseUrl, 'runs', async () => {
      const t0 = performance.now();
      const samples = await scrape();
      return { samples, ms: performance.now() - t0 };
    });
    expect(answered.ms).toBeLessThan(5000);
    expect(answered.samples('factoryd_metrics_database_up')).toBe(0);
    expect(answered.samples.text).not.toMatch(/^factoryd_runs\{/m);
    expect(answered.samples.text).not.toMatch(/^factoryd_notification_messages_pending /m);
    expect(answered.samples('factoryd_runs_claimed_total', { workers: 'service' })).toBe(1);
    // Once the database answers again, so do the depths.
    await eventually(async () => {
      const back = await scrape();
      expect(back('factoryd_metrics_database_up')).toBe(1);
      expect(back('factoryd_runs', { state: 'QUEUED', workers: 'service' })).toBe(0);
      return true;
    }, 'the depths back');
  });

  it("counts a harness start by its environment's setup: passed, started; failed, environment_failed", async () => {
    const before = await scrape();
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'x'.repeat(32));
    const repo = new TestRepo();
    repo.commit({
      ...baseFactory(),
      'environments/ready.yaml': 'setupCommands:\n  - echo ready\n',
      'environments/broken.yaml': 'setupCommands:\n  - echo broken; exit 3\n',
    });
    const f = await t.service.app
      .get(DefinitionStore)
      .register({ teamId: t.defaultTeam.id, name: 'environments', repoUrl: repo.dir, branch: 'main' });
    expect((await t.service.app.get(Reconciler).request(f!.id)).result).toBe('applied');
    const start = async (environment_id: string) =>
      (await t.call('POST', '/api/v1/agent/runs', { prompt: 'Go', config: { environment_id } })).body.run_id;
    expect((await runIn(t, await start('ready'), ['SUCCEEDED', 'FAILED', 'ERROR'])).state).toBe('SUCCEEDED');
    expect((await runIn(t, await start('broken'), ['SUCCEEDED', 'FAILED', 'ERROR'])).state).toBe('FAILED');
    repo.remove();

    const after = await scrape();
    const starts = (outcome: string) =>
      moved(before, after, 'factoryd_harness_starts_total', { harness: 'oz', outcome });
    expect([starts('started'), starts('environment_failed')]).toEqual([1, 1]);
  });
});
