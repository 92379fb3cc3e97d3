import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';

// Issue #13: the worker API hands out prompts, attachments and skills and records how runs end, so it
// takes only worker keys (scope `workers`), each bound to one worker_host of one team.
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

const worker = (path: string, body: Record<string, unknown>, key: string) =>
  t.call('POST', `/api/v1/agent/workers${path}`, body, key);

async function queue(host: string, prompt = `A job for ${host}`): Promise<string> {
  const res = await t.call('POST', '/api/v1/agent/runs', {
    prompt,
    config: { worker_host: host },
    attachments: [{ file_name: 'secret-plan.txt', data: Buffer.from('the plan').toString('base64') }],
  });
  expect(res.status).toBe(200);
  return res.body.run_id;
}

const run = async (id: string) => (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
const conversation = async (id: string) =>
  (await t.call('GET', `/api/v1/agent/runs/${id}/conversation`)).body.messages.map(
    (m: { text?: string; kind?: string }) => m.text ?? m.kind,
  );
const outcome = { exitCode: 0, result: { type: 'result', status: 'succeeded', message: 'forged' } };

describe('a runs:write key (a reader and writer of runs, no worker)', () => {
  it('is refused the claim and the finish (403), and the run is untouched; the refusal says how to get a worker key', async () => {
    const id = await queue('box-w');
    const writer = await t.newKey([t.defaultTeam], ['runs:read', 'runs:write'], 'ci');

    const claim = await worker('/claim', { worker_id: 'w1', worker_host: 'box-w' }, writer);
    expect(claim.status).toBe(403);
    expect(claim.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(claim.body.error).toBe('not_authorized');
    expect(claim.body.detail).toMatch(/lacks the scope workers/);
    expect(claim.body.detail).toContain(
      '`npx factoryd api-keys create --team default --scopes workers --worker-host ID`',
    );
    expect(JSON.stringify(claim.body)).not.toContain('the plan');
    expect(await run(id)).toMatchObject({ state: 'QUEUED' });

    // Held by the host's real worker: the writer can neither end it, nor report, nor read its follow-ups.
    const key = await t.workerKey('box-w');
    const claimed = await worker('/claim', { worker_id: 'real', worker_host: 'box-w' }, key);
    expect(claimed.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([id]);
    await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'for the worker only' });
    const as = { worker_id: 'real', worker_host: 'box-w', execution: 1 };
    for (const [path, body] of [
      [`/runs/${id}/finish`, { ...as, outcome }],
      [`/runs/${id}/events`, { ...as, events: [{ type: 'message', text: 'forged' }], started_ms_ago: 0 }],
      [`/runs/${id}/control`, as],
      ['/heartbeat', { ...as, run_ids: [id] }],
      ['/lost', { ...as, worker_ids: ['real'] }],
      ['/connect', as],
    ] as const) {
      for (const k of [writer, t.adminKey]) {
        const res = await worker(path, body, k);
        expect(res.status, path).toBe(403);
        expect(res.body.detail, path).toMatch(/lacks the scope workers/);
      }
    }
    const after = await run(id);
    expect(after.state).toBe('CLAIMED');
    expect(after.status_message ?? null).toBeNull();
    expect(await conversation(id)).toEqual([`A job for box-w`]);
    // The follow-up is still waiting for the worker that holds the run.
    const control = await worker(`/runs/${id}/control`, as, key);
    expect(control.body).toEqual({ stop: false, followups: ['for the worker only'] });
  });

  it('cannot be made into a worker key, nor a worker key into anything else', async () => {
    await expect(
      t.auth.createApiKey({
        teams: [t.defaultTeam],
        scopes: ['runs:write', 'workers'],
        name: 'x',
        workerHost: 'box',
      }),
    ).rejects.toThrow(/workers scope goes alone/);
    await expect(
      t.auth.createApiKey({ teams: [t.defaultTeam], scopes: ['workers'], name: 'x' }),
    ).rejects.toThrow(/needs --worker-host/);
    await expect(
      t.auth.createApiKey({ teams: [t.defaultTeam], scopes: ['runs:write'], name: 'x', workerHost: 'box' }),
    ).rejects.toThrow(/only for a key with --scopes workers/);
    await expect(
      t.auth.createApiKey({ teams: [t.defaultTeam], scopes: ['workers'], name: 'x', workerHost: 'warp' }),
    ).rejects.toThrow(/reserved/);
    // And a worker key reads no run, starts none.
    const key = await t.workerKey('box-r');
    expect((await t.call('GET', '/api/v1/agent/runs', undefined, key)).status).toBe(403);
    expect((await t.call('POST', '/api/v1/agent/runs', { prompt: 'hi' }, key)).status).toBe(403);
  });
});

describe('a worker key for host X', () => {
  it("cannot claim host Y's runs, nor report on or finish a run it does not hold", async () => {
    const [keyX, keyY] = [await t.workerKey('box-x'), await t.workerKey('box-y')];
    const onY = await queue('box-y');
    const onX = await queue('box-x');

    const other = await worker('/claim', { worker_id: 'x1', worker_host: 'box-y' }, keyX);
    expect(other.status).toBe(403);
    expect(other.body.detail).toMatch(/bound to worker_host "box-x" and cannot act for "box-y"/);
    expect(other.body.detail).toContain('--scopes workers --worker-host box-y');
    expect(await run(onY)).toMatchObject({ state: 'QUEUED' });

    // Its own claim (worker_host may be left out: the key says it) takes only its host's run.
    const own = await worker('/claim', { worker_id: 'x1', max: 16 }, keyX);
    expect(own.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([onX]);

    // Y's worker holds Y's run; X's key, even sending Y's worker id, changes nothing of it.
    expect((await worker('/claim', { worker_id: 'y1', worker_host: 'box-y' }, keyY)).body.runs).toHaveLength(
      1,
    );
    await t.call('POST', `/api/v1/agent/runs/${onY}/followups`, { message: 'for y only' });
    const asY = { worker_id: 'y1', execution: 1 };
    expect((await worker(`/runs/${onY}/finish`, { ...asY, outcome }, keyX)).status).toBe(200);
    await worker(
      `/runs/${onY}/events`,
      { ...asY, events: [{ type: 'message', text: 'forged' }], started_ms_ago: 0 },
      keyX,
    );
    expect((await worker(`/runs/${onY}/control`, asY, keyX)).body).toEqual({ stop: true, followups: [] });
    expect((await worker('/lost', { ...asY, worker_ids: ['y1'] }, keyX)).body).toEqual({ lost_runs: 0 });
    const forgedFinish = await worker(`/runs/${onY}/finish`, { ...asY, worker_host: 'box-y', outcome }, keyX);
    expect(forgedFinish.status).toBe(403);

    const y = await run(onY);
    expect(y.state).toBe('CLAIMED');
    expect(y.status_message ?? null).toBeNull();
    expect(await conversation(onY)).toEqual(['A job for box-y']);
    expect((await worker(`/runs/${onY}/control`, asY, keyY)).body).toEqual({
      stop: false,
      followups: ['for y only'],
    });
  });
});

describe("another team's worker key", () => {
  it('sees nothing of this team: no claim, no run, no report, no lost worker', async () => {
    const stranger = await t.newTeam('stranger');
    const theirs = await t.workerKey('box-s', stranger.team);
    const mine = await t.workerKey('box-s');
    const id = await queue('box-s');

    const claim = await worker('/claim', { worker_id: 's1', worker_host: 'box-s', max: 16 }, theirs);
    expect(claim.status).toBe(200);
    expect(claim.body.runs).toEqual([]);
    expect(await run(id)).toMatchObject({ state: 'QUEUED' });
    for (const path of [
      '/api/v1/agent/runs',
      `/api/v1/agent/runs/${id}`,
      '/api/v1/agent/connected-self-hosted-workers',
    ])
      expect((await t.call('GET', path, undefined, theirs)).status, path).toBe(403);

    expect((await worker('/claim', { worker_id: 's1', worker_host: 'box-s' }, mine)).body.runs).toHaveLength(
      1,
    );
    const as = { worker_id: 's1', worker_host: 'box-s', execution: 1 };
    await worker(`/runs/${id}/finish`, { ...as, outcome }, theirs);
    await worker(`/runs/${id}/events`, { ...as, events: [{ type: 'message', text: 'forged' }] }, theirs);
    expect((await worker(`/runs/${id}/control`, as, theirs)).body).toEqual({ stop: true, followups: [] });
    expect((await worker('/lost', { ...as, worker_ids: ['s1'] }, theirs)).body).toEqual({ lost_runs: 0 });
    expect(await run(id)).toMatchObject({ state: 'CLAIMED' });
    expect(await conversation(id)).toEqual(['A job for box-s']);
  });
});
