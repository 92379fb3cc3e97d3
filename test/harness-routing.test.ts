import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { WorkerRunsService } from '../src/workers/queue/worker-runs.service.js';
import { WorkersRepository } from '../src/workers/queue/workers.repository.js';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

// Which worker gets a run of a built-in harness, and what a run no worker can take says. No worker
// slots: the test claims as workers with the harnesses it names.
let t: TestService;
beforeAll(async () => {
  t = await startTestService({ WORKER_LEASE_SECONDS: '3' });
  await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'anthropic', 'sk-ant-routing');
});
afterAll(async () => t?.stop());

const create = async (config: Record<string, unknown>) => {
  const res = await t.call('POST', '/api/v1/agent/runs', { prompt: 'route me', config });
  expect(res.status).toBe(200);
  return res.body.run_id as string;
};
const worker = (harnesses: Array<{ type: string }>) => ({
  id: `w-${harnesses.map((h) => h.type).join('-')}-${Math.random()}`,
  host: 'warp',
  teamId: null,
  slots: 1,
  harnesses,
});

describe('harness routing', () => {
  it('a run whose harness no worker has stays QUEUED, saying which harness it waits for', async () => {
    const id = await create({ harness: { type: 'claude', auth_secret_name: 'anthropic' } });
    const oz = await create({});
    const run = await eventually(async () => {
      const r = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
      return r.status_message?.message && r;
    }, 'the waiting note');
    expect(run.state).toBe('QUEUED');
    expect(run.status_message.message).toBe(
      'Waiting for a worker with the claude harness: no connected worker has its CLI (install it where the workers run: npx factoryd harnesses install claude)',
    );
    expect((await t.call('GET', `/api/v1/agent/runs/${oz}`)).body.status_message ?? null).toBeNull();

    // A worker with only the harness command takes the oz run and leaves the claude one.
    const service = t.service.app.get(WorkerRunsService);
    const ozOnly = await service.claim(worker([{ type: 'oz' }]), 5);
    expect(ozOnly.map((a) => a.run_id)).toEqual([oz]);
    expect(ozOnly[0]!.harness).toBeUndefined();
    // One with Claude Code takes it, with the team secret's value for its harness's environment.
    const withClaude = await service.claim(worker([{ type: 'oz' }, { type: 'claude' }]), 5);
    expect(withClaude.map((a) => a.run_id)).toEqual([id]);
    expect(withClaude[0]!.harness).toEqual({
      type: 'claude',
      secret_name: 'anthropic',
      env: { ANTHROPIC_API_KEY: 'sk-ant-routing' },
    });
    // …and the note went with the claim; the run's detail never shows the key.
    const claimed = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
    expect(claimed.status_message ?? null).toBeNull();
    expect(JSON.stringify(claimed)).not.toContain('sk-ant-routing');
  });

  it('a worker with the harness coming or going changes the notes of runs queued long before', async () => {
    const id = await create({ harness: { type: 'codex', auth_secret_name: 'anthropic' } });
    const note = async () =>
      ((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.status_message?.message ?? null) as
        string | null;
    await eventually(async () => (await note())?.includes('codex harness'), 'the waiting note');
    // Queued an hour ago: only a pass over every queued run reads it (the others read the recent ones).
    await t.service.db.execute(`UPDATE runs SET created_at = now() - interval '1 hour' WHERE id = $1`, [id]);
    const registry = new WorkersRepository(t.service.db);
    const codex = { ...worker([{ type: 'codex' }]), slots: 0 };
    await registry.register(codex, new Date());
    await eventually(async () => (await note()) === null, 'the note cleared once a worker has codex');
    await registry.unregister(codex);
    await eventually(
      async () => (await note())?.includes('codex harness'),
      'the note back once that worker is gone',
    );
    expect((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.state).toBe('QUEUED');
    await t.call('POST', `/api/v1/agent/runs/${id}/cancel`);
  });

  it('the team default harness applies to runs that name none', async () => {
    await t.authRepo.setHarnessType(t.defaultTeam.id, 'claude');
    try {
      const id = await create({ harness: { auth_secret_name: 'anthropic' } });
      const service = t.service.app.get(WorkerRunsService);
      expect(await service.claim(worker([{ type: 'oz' }]), 5)).toEqual([]);
      const [a] = await service.claim(worker([{ type: 'claude' }]), 5);
      expect(a).toMatchObject({ run_id: id, harness: { type: 'claude' } });
    } finally {
      await t.authRepo.setHarnessType(t.defaultTeam.id, null);
    }
  });
});
