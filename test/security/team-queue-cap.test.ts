import { afterAll, beforeAll, expect, it } from 'vitest';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

// Issue #32, 8: a team could queue runs without end and fill the shared database. An attacker's team
// floods the run API and its factory's dispatch; it is told 429 with Retry-After at its cap, while
// another team goes on creating runs, and it gets room again as soon as one of its runs leaves the queue.
let t: TestService;
let factoryUid: string;
const repo = new TestRepo();

beforeAll(async () => {
  // No worker slots (the test service's default): every run stays QUEUED.
  t = await startTestService({ TEAM_MAX_QUEUED_RUNS: '3', FACTORY_POLL_SECONDS: '3600' });
  await t.service.app.get(ReconcileScheduler).firstPoll;
  await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'v');
  repo.commit(baseFactory());
  const f = (await t.service.app
    .get(DefinitionStore)
    .register({ teamId: t.defaultTeam.id, name: 'flood', repoUrl: repo.dir, branch: 'main' }))!;
  expect((await t.service.app.get(Reconciler).request(f.id)).errors).toEqual([]);
  factoryUid = f.uid;
});
afterAll(async () => {
  await t?.stop();
  repo.remove();
});

it("answers 429 with Retry-After at a team's cap of queued runs, from the run API and from a dispatch; other teams go on", async () => {
  const create = (key?: string) => t.call('POST', '/api/v1/agent/runs', { prompt: 'flood' }, key);
  const created = [await create(), await create()];
  const dispatched = await t.call('POST', `/api/v1/factory/${factoryUid}/runs`, { prompt: 'flood too' });
  expect([...created, dispatched].map((r) => r.status)).toEqual([200, 200, 200]);

  const refused = await create();
  expect(refused.status).toBe(429);
  expect(refused.headers.get('retry-after')).toBe('30');
  expect(refused.body).toMatchObject({
    status: 429,
    detail: expect.stringMatching(
      /this team has 3 runs queued, the most it may have \(TEAM_MAX_QUEUED_RUNS\)/,
    ),
  });
  const refusedDispatch = await t.call('POST', `/api/v1/factory/${factoryUid}/runs`, { prompt: 'more' });
  expect(refusedDispatch.status).toBe(429);
  // Nothing was created by the refusals.
  const listed = await t.call('GET', '/api/v1/agent/runs?state=QUEUED');
  expect(listed.body.runs).toHaveLength(3);

  // Another team is not held up by the flood.
  const other = await t.newTeam('bystander');
  expect((await create(other.key)).status).toBe(200);

  // A run that leaves the queue (cancelled here) makes room for one more.
  expect((await t.call('POST', `/api/v1/agent/runs/${created[0]!.body.run_id}/cancel`)).status).toBe(200);
  expect((await create()).status).toBe(200);
  expect((await create()).status).toBe(429);
});

it('refuses a TEAM_MAX_QUEUED_RUNS that is not a whole number from 1, naming it', async () => {
  await expect(startTestService({ TEAM_MAX_QUEUED_RUNS: '0' })).rejects.toThrow(/TEAM_MAX_QUEUED_RUNS/);
});
