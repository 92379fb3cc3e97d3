import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { startTestService, type TestService } from './support/service.js';

// `factoryd worker` as a real separate process (built code), against the test service's database
// (service-hosted mode) or its HTTP API (self-hosted mode). The service itself runs no workers.
let t: TestService;
const children: ChildProcess[] = [];
beforeAll(async () => {
  execFileSync(process.execPath, [
    fromRoot('node_modules/typescript/bin/tsc'),
    '-p',
    fromRoot('tsconfig.build.json'),
  ]);
  t = await startTestService({ WORKER_LEASE_SECONDS: '2' });
}, 180_000);
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});
afterAll(async () => t?.stop());

function worker(args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, [fromRoot('dist/cli/main.js'), 'worker', ...args], {
    env: { ...process.env, LOG_LEVEL: 'silent', WORKER_LEASE_SECONDS: '2', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  child.on('exit', (code) => {
    if (code && code !== 0) process.stderr.write(`worker exited ${code}: ${err}\n`);
  });
  children.push(child);
  return child;
}

async function create(body: Record<string, unknown>, key?: string): Promise<string> {
  const res = await t.call('POST', '/api/v1/agent/runs', body, key);
  expect(res.status).toBe(200);
  return res.body.run_id;
}

async function waitFor(runId: string, states: string[], timeoutMs = 20_000, key?: string): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await t.call('GET', `/api/v1/agent/runs/${runId}`, undefined, key);
    if (states.includes(res.body.state)) return res.body;
    if (Date.now() > deadline)
      throw new Error(`run ${runId} is ${res.body.state}, expected ${states.join('|')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('factoryd worker (service-hosted, on the database)', () => {
  it('runs a queued run; killed with SIGKILL mid-run, its run ends as ERROR once the lease lapses', async () => {
    const w = worker(['--concurrency', '1'], { DATABASE_URL: t.service.databaseServer.url });
    const done = await create({ prompt: 'Quick one' });
    expect((await waitFor(done, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');

    const id = await create({ prompt: 'Long one\n/wait 120' });
    await waitFor(id, ['INPROGRESS']);
    w.kill('SIGKILL');
    // Nothing renews the lease now; the service's reaper ends the run.
    const run = await waitFor(id, ['ERROR', 'SUCCEEDED', 'FAILED'], 15_000);
    expect(run.state).toBe('ERROR');
    expect(run.status_message).toMatchObject({ error_code: 'lease_expired', retryable: true });
    expect(run.status_message.message).toMatch(/stopped renewing its lease/);
  });
});

describe('factoryd worker --worker-host (self-hosted, over HTTP)', () => {
  it("takes only its own host's runs in its own team, and shows up as connected", async () => {
    const other = await t.newTeam('other-team');
    const args = ['--worker-host', 'box-a', '--api', `${t.api}`, '--api-key', t.adminKey];
    worker(args);
    const mine = await create({ prompt: 'On box a', config: { worker_host: 'box-a' } });
    const elsewhere = await create({ prompt: 'On box b', config: { worker_host: 'box-b' } });
    const serviceHosted = await create({ prompt: 'On the service' });
    const otherTeams = await create(
      { prompt: 'Other team, same host id', config: { worker_host: 'box-a' } },
      other.key,
    );

    const run = await waitFor(mine, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(run.execution_location).toBe('self_hosted');
    expect(
      (await t.call('GET', `/api/v1/agent/runs/${mine}/conversation`)).body.messages.length,
    ).toBeGreaterThan(2);
    await new Promise((r) => setTimeout(r, 500));
    for (const id of [elsewhere, serviceHosted])
      expect((await waitFor(id, ['QUEUED', 'CLAIMED', 'INPROGRESS'])).state).toBe('QUEUED');
    expect((await waitFor(otherTeams, ['QUEUED', 'CLAIMED'], 1000, other.key)).state).toBe('QUEUED');

    const connected = await t.call('GET', '/api/v1/agent/connected-self-hosted-workers');
    expect(connected.status).toBe(200);
    expect(connected.body.workers).toEqual([
      {
        worker_host: 'box-a',
        connection_count: 1,
        connected_at: expect.any(String),
        last_seen_at: expect.any(String),
      },
    ]);
    expect(
      (await t.call('GET', '/api/v1/agent/connected-self-hosted-workers', undefined, other.key)).body.workers,
    ).toEqual([]);
  });

  it('follows a follow-up and a cancel over HTTP, and a restarted worker picks up new runs', async () => {
    const args = ['--worker-host', 'box-c', '--api', `${t.api}`, '--api-key', t.adminKey];
    let w = worker(args);
    const asked = await create({ prompt: 'Ask me\n/ask Proceed?', config: { worker_host: 'box-c' } });
    await waitFor(asked, ['BLOCKED']);
    await t.call('POST', `/api/v1/agent/runs/${asked}/followups`, { message: 'yes' });
    expect((await waitFor(asked, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');

    const long = await create({ prompt: 'Long\n/wait 200', config: { worker_host: 'box-c' } });
    await waitFor(long, ['INPROGRESS']);
    await t.call('POST', `/api/v1/agent/runs/${long}/cancel`);
    // Generous: on a loaded 2-core CI machine the poll, the signal and the exit can take seconds.
    const gone = Date.now() + 20_000;
    while (execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes('sleep 200')) {
      if (Date.now() > gone) throw new Error('the cancelled harness is still running');
      await new Promise((r) => setTimeout(r, 50));
    }
    expect((await waitFor(long, ['CANCELLED'])).state).toBe('CANCELLED');

    w.kill('SIGTERM');
    await new Promise((r) => w.once('exit', r));
    w = worker(args);
    const later = await create({ prompt: 'After the restart', config: { worker_host: 'box-c' } });
    expect((await waitFor(later, ['SUCCEEDED', 'FAILED'])).state).toBe('SUCCEEDED');
  });

  it('refuses the reserved host id and bad worker ids', async () => {
    const res = await t.call('POST', '/api/v1/agent/workers/claim', { worker_id: 'w1', worker_host: 'warp' });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/reserved/);
    const bad = await t.call('POST', '/api/v1/agent/workers/claim', { worker_id: 'a b', worker_host: 'box' });
    expect(bad.status).toBe(400);
    const unauth = await t.call(
      'POST',
      '/api/v1/agent/workers/claim',
      { worker_id: 'w', worker_host: 'box' },
      '',
    );
    expect(unauth.status).toBe(401);
  });
});
