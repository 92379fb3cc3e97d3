import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { artifactText } from './support/artifacts.js';
import { runCli } from './support/cli.js';
import { eventually } from './support/eventually.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { uniqueSleep } from './support/sleeps.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// Real service, real PostgreSQL, two service-hosted worker slots running the shipped example harness.
let t: TestService;
beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '2',
    WORKER_LEASE_SECONDS: '3',
    HARNESS_KILL_GRACE_MS: '1000',
    // A run's idle_timeout_minutes counts 2-second "minutes" here.
    IDLE_TIMEOUT_MINUTE_MS: '2000',
  });
});
afterAll(async () => t?.stop());

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await t.call('POST', '/api/v1/agent/runs', body);
  expect(res.status).toBe(200);
  return res.body.run_id;
}

const waitFor = (runId: string, states: string[], key?: string) => runIn(t, runId, states, key);

const conversation = async (runId: string) =>
  (await t.call('GET', `/api/v1/agent/runs/${runId}/conversation`)).body;

describe('service-hosted workers running the example harness', () => {
  it('runs a run to SUCCEEDED with its attachment, a summary artifact and a conversation', async () => {
    const payload = {
      action: 'opened',
      repository: { full_name: 'acme/api' },
      issue: { title: 'Crash on start' },
    };
    const id = await create({
      prompt: 'Triage the new issue',
      attachments: [
        { file_name: 'event-payload.json', data: Buffer.from(JSON.stringify(payload)).toString('base64') },
      ],
    });
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(run.started_at).toEqual(expect.any(String));
    expect(run.run_time).toMatch(/^PT/);
    expect(run.session_id).toEqual(expect.any(String));
    expect(run.session_link).toBe(`${t.url}/ui/runs/${id}`);
    expect(run.status_message.message).toMatch(/summary\.md/);
    expect(run.artifacts[0]).toMatchObject({ artifact_type: 'FILE', data: { filename: 'summary.md' } });
    expect(await artifactText(t, run.artifacts[0])).toContain('issue "Crash on start"');
    const conv = await conversation(id);
    expect(conv.session_id).toBe(run.session_id);
    expect(conv.messages[0]).toMatchObject({ type: 'message', role: 'user', text: 'Triage the new issue' });
    expect(conv.messages.map((m: any) => m.text ?? m.kind)).toContain(
      'Read event-payload.json: keys: action, repository, issue; action opened; repository acme/api; issue "Crash on start".',
    );
    expect(conv.messages.at(-1)).toMatchObject({ type: 'action', kind: 'artifact' });
    // The workspace (with the summary the harness wrote in it) is removed once the run is done.
    const workspaces = join(t.dataDir, 'workspaces');
    const left = () =>
      readdirSync(workspaces).flatMap((w) =>
        readdirSync(join(workspaces, w)).filter((d) => d.startsWith(id)),
      );
    await eventually(() => !left().length, 'the workspace removed');
  });

  it('ends a run as FAILED with the last lines of output when the harness exits non-zero', async () => {
    const id = await create({ prompt: 'Try this\n/fail the build is red' });
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('FAILED');
    expect(run.status_message.message).toContain('exited with status 2');
    expect(run.status_message.message).toContain('error: the build is red');
  });

  it('turns BLOCKED when the agent asks, and a follow-up resumes it', async () => {
    const id = await create({ prompt: 'Label the issue\n/ask Which label should I use?' });
    const blocked = await waitFor(id, ['BLOCKED', 'SUCCEEDED', 'FAILED']);
    expect(blocked.state).toBe('BLOCKED');
    expect(blocked.status_message.message).toBe('Which label should I use?');
    expect((await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'bug' })).status).toBe(200);
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(await artifactText(t, run.artifacts[0])).toContain(
      'Asked "Which label should I use?", answered "bug"',
    );
    const texts = (await conversation(id)).messages.map((m: any) => m.text);
    expect(texts.indexOf('bug')).toBeGreaterThan(-1);
    expect(texts.indexOf('Thanks, continuing with: bug')).toBeGreaterThan(texts.indexOf('bug'));
  });

  it('writes a follow-up to a live run into its harness', async () => {
    const id = await create({ prompt: 'Work a while\n/wait 2' });
    await waitFor(id, ['INPROGRESS']);
    await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'also check the docs' });
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(await artifactText(t, run.artifacts[0])).toContain('Follow-up: also check the docs');
  });

  it('continues an ended run in the same conversation with a new execution', async () => {
    const id = await create({ prompt: 'First pass' });
    const first = await waitFor(id, ['SUCCEEDED']);
    await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'Now a second pass' });
    // Ended again: the second execution's summary is there.
    const second = await eventually(async () => {
      const run = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
      return run.state === 'SUCCEEDED' && run.artifacts.length === 2 && run;
    }, 'the second execution ended');
    // The first execution's summary.md was left as a handoff: the second found it and says so.
    expect(await artifactText(t, second.artifacts[1])).toMatch(
      /^Handoff file: handoff\/summary\.md \(\d+ bytes\)$/m,
    );
    expect(second.status_message.message).toContain('1 handoff file found');
    const conv = await conversation(id);
    expect(
      conv.messages.some((m: any) => m.text === 'Continuing our conversation (2 earlier messages).'),
    ).toBe(true);
    expect(conv.messages.filter((m: any) => m.execution === 2).length).toBeGreaterThan(0);
    expect(second.session_id).toBe(first.session_id);
  });

  it('cancels a live run: CANCELLED, and no process of its harness is left', async () => {
    const sleep = uniqueSleep(300);
    const id = await create({ prompt: `Long job\n${sleep.wait}` });
    await waitFor(id, ['INPROGRESS']);
    await eventually(() => running(sleep.processArgs), 'the harness at work');
    const res = await t.call('POST', `/api/v1/agent/runs/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.body).toBe(id);
    expect((await waitFor(id, ['CANCELLED'])).state).toBe('CANCELLED');
    await eventually(() => !running(sleep.processArgs), 'the harness gone');
    // The worker did not overwrite the cancel when the harness died: its end report (which clears
    // the lease) has landed.
    await eventually(
      async () =>
        (await t.service.db.query(`SELECT 1 FROM runs WHERE id = $1 AND lease_owner IS NULL`, [id])).length,
      "the worker's end report",
    );
    expect((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.state).toBe('CANCELLED');
  });

  it('interrupts the example harness: its work stops, the run waits BLOCKED, a follow-up resumes it to SUCCEEDED', async () => {
    const sleep = uniqueSleep(300);
    const id = await create({ prompt: `Long job\n${sleep.wait}\n/bundled-skill never-reached` });
    await waitFor(id, ['INPROGRESS']);
    await eventually(() => running(sleep.processArgs), 'the harness at work');
    expect((await t.call('POST', `/api/v1/agent/runs/${id}/interrupt`)).status).toBe(202);
    const blocked = await waitFor(id, ['BLOCKED']);
    expect(blocked.status_message.message).toBe('interrupted; send a follow-up to continue');
    await eventually(() => !running(sleep.processArgs), 'the work stopped');
    await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'carry on' });
    await waitFor(id, ['SUCCEEDED']);
    const texts = (await conversation(id)).messages.map(
      (m: { text?: string; kind?: string }) => m.text ?? m.kind,
    );
    expect(texts).toContain('Resuming with your follow-up: carry on');
    // The rest of the interrupted turn was dropped.
    expect(texts).not.toContain('read_skill');
  });

  it('stops a harness that stays silent past idle_timeout_minutes: FAILED (idle_timeout), no process left', async () => {
    const sleep = uniqueSleep(301);
    const id = await create({ prompt: `Go quiet\n${sleep.wait}`, config: { idle_timeout_minutes: 1 } });
    await waitFor(id, ['INPROGRESS']);
    await eventually(() => running(sleep.processArgs), 'the harness at work');
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED']);
    expect(run.state).toBe('FAILED');
    expect(run.status_message.reason).toBe('idle_timeout');
    expect(run.status_message.message).toMatch(
      /idle \(no output, no input\) for longer than idle_timeout_minutes/,
    );
    // Stopped after the limit (a 2-second minute), not before.
    expect(Date.parse(run.updated_at) - Date.parse(run.started_at)).toBeGreaterThanOrEqual(2000);
    await eventually(() => !running(sleep.processArgs), 'no process of the harness left');
  });

  it('lets a harness that keeps talking run past idle_timeout_minutes', async () => {
    // Half-second silences (each ended by a message) add up to more than the 2-second limit.
    const prompt = ['Keep talking', ...Array(6).fill('/wait 0.5\n/skill none')].join('\n');
    const run = await waitFor(await create({ prompt, config: { idle_timeout_minutes: 1 } }), [
      'SUCCEEDED',
      'FAILED',
      'ERROR',
    ]);
    expect(run.state).toBe('SUCCEEDED');
    expect(Date.parse(run.updated_at) - Date.parse(run.started_at)).toBeGreaterThan(2000);
  });

  it('keeps a run for a self-hosted host that is not connected QUEUED, saying so', async () => {
    const id = await create({ prompt: 'Build on my box', config: { worker_host: 'nobody-here' } });
    const run = await eventually(async () => {
      const found = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
      return found.status_message && found;
    }, 'a status message');
    expect(run.state).toBe('QUEUED');
    expect(run.status_message.message).toContain('no worker with this id is connected');
  });
});

describe('the self-hosted worker API', () => {
  /** A worker key per host of the team `default` (the worker API takes no other key). */
  const keys = new Map<string, Promise<string>>();
  const keyFor = (host: string) => {
    if (!keys.has(host)) keys.set(host, t.workerKey(host));
    return keys.get(host)!;
  };
  const asWorker = async (host: string, path: string, body: Record<string, unknown>) =>
    t.call('POST', `/api/v1/agent/workers${path}`, body, await keyFor(host));
  const claimAs = (workerId: string, host: string) =>
    asWorker(host, '/claim', { worker_id: workerId, worker_host: host, max: 1 });
  const lost = async (body: Record<string, unknown>, key?: string) =>
    t.call('POST', '/api/v1/agent/workers/lost', body, key ?? (await keyFor('box-l')));

  it('claims at most `max` runs, oldest first, and never one another worker holds', async () => {
    const ids: string[] = [];
    for (const n of [1, 2, 3, 4])
      ids.push(await create({ prompt: `Queued ${n}`, config: { worker_host: 'box-q' } }));
    const first = await asWorker('box-q', '/claim', { worker_id: 'q1', worker_host: 'box-q', max: 1 });
    expect(first.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([ids[0]]);
    const next = await asWorker('box-q', '/claim', { worker_id: 'q2', worker_host: 'box-q', max: 2 });
    expect(next.body.runs.map((r: { run_id: string }) => r.run_id).sort()).toEqual([ids[1], ids[2]].sort());
    expect((await t.call('GET', `/api/v1/agent/runs/${ids[3]}`)).body.state).toBe('QUEUED');
  });

  it("takes a short run's start, events and end in one report, dated by the worker's own measure", async () => {
    const worker = { worker_id: 's1', worker_host: 'box-s' };
    const id = await create({ prompt: 'Quick one', config: { worker_host: 'box-s' } });
    const claimed = await asWorker('box-s', '/claim', worker);
    expect(claimed.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([id]);
    const finish = (outcome: Record<string, unknown>) =>
      asWorker('box-s', `/runs/${id}/finish`, { ...worker, execution: 1, outcome });

    // Malformed reports are refused whole: nothing recorded, the run still CLAIMED.
    for (const [outcome, message] of [
      [{ exitCode: 0, startedMsAgo: -5 }, /outcome.startedMsAgo must be >= 0/],
      [
        { exitCode: 0, startedMsAgo: 1.5 },
        /outcome.startedMsAgo must be integer or null, not a number \(1.5\)/,
      ],
      [{ exitCode: 0, events: 'done' }, /outcome.events must be array, not a string/],
    ] as const) {
      const res = await finish(outcome);
      expect(res.status).toBe(400);
      expect(res.body.detail).toMatch(message);
    }
    const events = await asWorker('box-s', `/runs/${id}/events`, {
      ...worker,
      execution: 1,
      events: [],
      started_ms_ago: 'soon',
    });
    expect(events.status).toBe(400);
    expect(events.body.detail).toMatch(/started_ms_ago must be integer or null, not a string \("soon"\)/);
    expect((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.state).toBe('CLAIMED');

    const res = await finish({
      exitCode: 0,
      startedMsAgo: 1500,
      events: [
        { type: 'message', role: 'assistant', text: 'done quickly' },
        { type: 'result', status: 'succeeded', message: 'all done' },
      ],
      result: { type: 'result', status: 'succeeded', message: 'all done' },
    });
    expect(res.status).toBe(200);
    const run = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
    expect(run.state).toBe('SUCCEEDED');
    expect(run.status_message.message).toBe('all done');
    // started_at is 1.5 s before the end (when the harness started), not when the report arrived.
    const ranMs = Date.parse(run.updated_at) - Date.parse(run.started_at);
    expect(ranMs).toBeGreaterThanOrEqual(1500);
    expect(ranMs).toBeLessThan(10_000);
    expect((await conversation(id)).messages.map((m: { text?: string }) => m.text)).toEqual([
      'Quick one',
      'done quickly',
    ]);
  });

  it('reports a start on its own (no events yet) as INPROGRESS, dated by the worker', async () => {
    const worker = { worker_id: 's2', worker_host: 'box-t' };
    const id = await create({ prompt: 'Slow one', config: { worker_host: 'box-t' } });
    await asWorker('box-t', '/claim', worker);
    const res = await asWorker('box-t', `/runs/${id}/events`, {
      ...worker,
      execution: 1,
      events: [],
      started_ms_ago: 2000,
    });
    expect(res.status).toBe(200);
    const run = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
    expect(run.state).toBe('INPROGRESS');
    expect(Date.parse(run.updated_at) - Date.parse(run.started_at)).toBeGreaterThanOrEqual(2000);
  });

  it('a killed launcher takes its harnesses with it: the run FAILS saying so, no process is left, the next run works', async () => {
    const sleep = uniqueSleep(303);
    const id = await create({ prompt: `Long job\n${sleep.wait}` });
    await waitFor(id, ['INPROGRESS']);
    await eventually(() => running(sleep.processArgs), 'the harness at work');
    // The worker's launchers are children of this process (the service runs in it): kill them all.
    const launchers = execFileSync('ps', ['-eo', 'pid,ppid,args'], { encoding: 'utf8' })
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .filter(([, ppid, ...args]) => Number(ppid) === process.pid && args.join(' ').includes('launcher.js'));
    expect(launchers.length, 'a launcher is a child of this process').toBeGreaterThan(0);
    for (const [pid] of launchers) process.kill(Number(pid), 'SIGKILL');
    const run = await waitFor(id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED']);
    expect(run.state).toBe('FAILED');
    expect(run.status_message.message).toMatch(/the harness launcher died/);
    await eventually(() => !running(sleep.processArgs), 'no process of the harness left');
    expect((await waitFor(await create({ prompt: 'After it' }), ['SUCCEEDED', 'FAILED'])).state).toBe(
      'SUCCEEDED',
    );
  });

  it("ends a dead worker's runs when its restarted successor reports it, and only within the caller's team and host", async () => {
    const id = await create({ prompt: 'Held by a worker that dies', config: { worker_host: 'box-l' } });
    const claimed = await claimAs('dead-one', 'box-l');
    expect(claimed.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([id]);

    const other = await t.newTeam('lost-other-team');
    const foreign = await lost(
      { worker_id: 'w2', worker_host: 'box-l', worker_ids: ['dead-one'] },
      await t.workerKey('box-l', other.team),
    );
    expect(foreign.body).toEqual({ lost_runs: 0 });
    const otherHost = await lost(
      { worker_id: 'w2', worker_host: 'box-m', worker_ids: ['dead-one'] },
      await keyFor('box-m'),
    );
    expect(otherHost.body).toEqual({ lost_runs: 0 });
    // (renewed, so that a slow machine cannot let this run's 3 s lease lapse first)
    await asWorker('box-l', '/heartbeat', { worker_id: 'dead-one', worker_host: 'box-l', run_ids: [id] });
    expect((await t.call('GET', `/api/v1/agent/runs/${id}`)).body.state).toBe('CLAIMED');

    const res = await lost({ worker_id: 'w2', worker_host: 'box-l', worker_ids: ['dead-one'] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ lost_runs: 1 });
    const run = (await t.call('GET', `/api/v1/agent/runs/${id}`)).body;
    expect(run.state).toBe('ERROR');
    expect(run.status_message).toMatchObject({ reason: 'worker_lost', retryable: true });
    expect(run.status_message.message).toMatch(/died while running this run/);
  });

  it.each([
    [{ worker_id: 'w2', worker_host: 'box-l' }, 400, /worker_ids is required/],
    [{ worker_id: 'w2', worker_host: 'box-l', worker_ids: 'dead-one' }, 400, /worker_ids must be array/],
    [
      { worker_id: 'w2', worker_host: 'box-l', worker_ids: ['a b'] },
      400,
      /worker_ids.0 must match .*1-128 characters/,
    ],
    [{ worker_id: 'w2', worker_host: 'box-l', worker_ids: Array(101).fill('w') }, 400, /more than 100 items/],
    [{ worker_id: 'w2', worker_host: 'warp', worker_ids: ['w'] }, 403, /bound to worker_host "box-l"/],
  ])('refuses a bad lost-workers report %#', async (body, status, detail) => {
    const res = await lost(body);
    expect(res.status).toBe(status);
    expect(res.body.detail).toMatch(detail);
  });
});

describe('worker protocol bodies, checked by their schemas (schemas/api/worker-*.schema.json)', () => {
  const run = '00000000-0000-4000-8000-0000000000b1';
  const as = { worker_id: 'm1', worker_host: 'box-b' };
  let key: Promise<string> | undefined;
  const post = async (path: string, body: unknown) =>
    t.call('POST', `/api/v1/agent/workers${path}`, body, await (key ??= t.workerKey('box-b')));

  // Each body was taken before (its bad field ignored, dropped or read as something else): now a 400
  // naming the field, while the same route with a well-formed body answers 200.
  it.each([
    ['/connect', { ...as, worker_id: 7 }, /worker_id must be string, not a number \(7\)/],
    ['/claim', { ...as, max: 'lots' }, /max must be integer, not a string \("lots"\)/],
    ['/claim', { ...as, wait_seconds: -1 }, /wait_seconds must be >= 0/],
    ['/heartbeat', { ...as, run_ids: ['not-a-run'] }, /run_ids.0 must match .*a UUID.*, not "not-a-run"/],
    ['/heartbeat', { ...as, run_ids: 'all' }, /run_ids must be array, not a string/],
    [`/runs/${run}/events`, { ...as, execution: 1, events: [42] }, /events.0 must be object, not a number/],
    [`/runs/${run}/events`, { ...as, execution: 1, events: [{ text: 'hi' }] }, /events.0.type is required/],
    [`/runs/${run}/control`, { worker_host: 'box-b' }, /worker_id is required/],
    [
      `/runs/${run}/finish`,
      { ...as, execution: 1, outcome: { stoppedBy: 'bored' } },
      /outcome.stoppedBy must be one of "cancel", "idle", "max_duration", "shutdown", not "bored"/,
    ],
    [
      `/runs/${run}/finish`,
      { ...as, execution: 1, outcome: { lastLines: [1, 2] } },
      /outcome.lastLines.0 must be string, not a number/,
    ],
    [`/runs/${run}/finish`, { ...as, execution: 1, outcome: 'done' }, /outcome must be object, not a string/],
  ])('refuses a malformed body on %s (400, problem+json naming the field) %#', async (path, body, detail) => {
    const res = await post(path, body);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({
      status: 400,
      error: 'invalid_request',
      detail: expect.stringMatching(detail),
    });
  });

  it.each([
    ['/connect', as],
    ['/claim', { ...as, max: 40, wait_seconds: 0 }],
    ['/heartbeat', { ...as, run_ids: [run] }],
    [
      `/runs/${run}/events`,
      { ...as, execution: 1, events: [{ type: 'message', role: 'assistant', text: 'hi' }] },
    ],
    [`/runs/${run}/control`, as],
    [`/runs/${run}/finish`, { ...as, execution: 1, outcome: { exitCode: 0, lastLines: ['ok'] } }],
    // A newer worker's extra fields are ignored, so that it can talk to this service.
    ['/heartbeat', { ...as, run_ids: [], load: 0.5 }],
  ])('takes a well-formed body on %s %#', async (path, body) => {
    expect((await post(path, body)).status).toBe(200);
  });
});

describe("a team's own harness (factoryd teams set-harness)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-cli-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  const cli = (...args: string[]) =>
    runCli(args, {
      env: { DATABASE_URL: t.service.databaseServer.url, DATA_DIR: dataDir, LOG_LEVEL: 'silent' },
    });
  const TEAM_HARNESS = `echo '{"type":"message","text":"hello from the team harness"}'`;

  it.skipIf(twoTeamsRefused)(
    `runs the team's command for its runs on the service-hosted workers; other teams keep HARNESS_COMMAND${twoTeamsNote}`,
    async () => {
      const team = await t.newTeam('harness-team');
      const set = await cli('teams', 'set-harness', 'harness-team', '--', TEAM_HARNESS);
      expect(set.code, set.stderr).toBe(0);
      const listed = JSON.parse((await cli('teams', 'list', '--json')).stdout).teams;
      expect(listed.find((x: { name: string }) => x.name === 'harness-team').harness_command).toBe(
        TEAM_HARNESS,
      );
      expect(listed.find((x: { name: string }) => x.name === 'default').harness_command).toBeNull();

      const theirs = await t.call('POST', '/api/v1/agent/runs', { prompt: 'Whose harness?' }, team.key);
      const ran = await waitFor(theirs.body.run_id, ['SUCCEEDED', 'FAILED', 'ERROR'], team.key);
      expect(ran.state).toBe('SUCCEEDED');
      const texts = (
        await t.call('GET', `/api/v1/agent/runs/${ran.run_id}/conversation`, undefined, team.key)
      ).body.messages.map((m: { text?: string }) => m.text);
      expect(texts).toEqual(['Whose harness?', 'hello from the team harness']);
      // Another team's run: the environment's harness (the example agent and its summary).
      const mine = await waitFor(await create({ prompt: 'And mine?' }), ['SUCCEEDED', 'FAILED', 'ERROR']);
      expect(mine.artifacts[0]).toMatchObject({ artifact_type: 'FILE', data: { filename: 'summary.md' } });

      // A self-hosted worker of that team is not told what to execute: it runs its own HARNESS_COMMAND.
      await t.call(
        'POST',
        '/api/v1/agent/runs',
        { prompt: 'On my box', config: { worker_host: 'box-h' } },
        team.key,
      );
      const claimed = await t.call(
        'POST',
        '/api/v1/agent/workers/claim',
        { worker_id: 'h1', worker_host: 'box-h' },
        await t.workerKey('box-h', team.team),
      );
      expect(claimed.body.runs).toHaveLength(1);
      expect(claimed.body.runs[0]).not.toHaveProperty('harness_command');

      const reset = await cli('teams', 'set-harness', 'harness-team', '--default', '--json');
      expect(JSON.parse(reset.stdout)).toEqual({ name: 'harness-team', harness_command: null });
      const after = await t.call('POST', '/api/v1/agent/runs', { prompt: 'Back to default' }, team.key);
      const again = await waitFor(after.body.run_id, ['SUCCEEDED', 'FAILED', 'ERROR'], team.key);
      expect(again.artifacts[0]).toMatchObject({ artifact_type: 'FILE', data: { filename: 'summary.md' } });
    },
  );

  it('refuses a bad set-harness with a message, changing nothing', async () => {
    for (const [args, message] of [
      [['nosuch-team', '--', 'true'], /no team nosuch-team/],
      [['default'], /give the harness command after --/],
      [['default', '--default', '--', 'true'], /either a command or --default/],
    ] as const) {
      const res = await cli('teams', 'set-harness', ...args);
      expect(res.code).not.toBe(0);
      expect(res.stderr).toMatch(message);
    }
    const listed = JSON.parse((await cli('teams', 'list', '--json')).stdout).teams;
    expect(listed.find((x: { name: string }) => x.name === 'default').harness_command).toBeNull();
  });
});

/** Whether a process whose command line contains `pattern` runs. */
const running = (pattern: string) => processes().some((c) => c.includes(pattern));

function processes(): string[] {
  return execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n');
}
