import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fromRoot } from '../src/common/paths.js';
import { MAX_MODELS_PER_RUN, RunUsageRepository } from '../src/runs/run-usage.repository.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { packageProgramCommand } from '../src/workers/launcher/harness-programs.js';
import { eventually } from './support/eventually.js';
import { forgedLink } from './support/artifacts.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import type { TeamRef } from '../src/auth/auth-context.js';
import { WorkerRunsService } from '../src/workers/queue/worker-runs.service.js';
import { python } from './oz-wire/support.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// The API real harnesses give meaning to (models, interrupt, transcript, token usage), driven end to
// end: the real service, a service-hosted worker and a scripted harness speaking the protocol
// (test/fixtures/interrupt-harness.mjs). Requests are shaped as the Oz clients send them.
const HARNESS_COMMAND = packageProgramCommand('test/fixtures', 'interrupt-harness.mjs');
let t: TestService;
let other: { team: TeamRef; key: string };
// The service's workers look for the agent CLIs here: none (GET /agent/models then sees only the
// workers a test connects).
const noClis = mkdtempSync(join(tmpdir(), 'factoryd-no-clis-'));
beforeAll(async () => {
  process.env.HARNESSES_DIR = noClis;
  t = await startTestService({
    WORKER_LEASE_SECONDS: '3',
    WORKER_CONCURRENCY: '2',
    HARNESS_KILL_GRACE_MS: '1000',
    HARNESS_COMMAND,
    HARNESS_MODELS: 'claude:claude-stub-model,oz:team-model',
  });
  other = await t.newTeam('other-team');
});
afterAll(async () => {
  await t?.stop();
  rmSync(noClis, { recursive: true, force: true });
});

// The team's scripted harness (`oz`): a built-in harness type would run its CLI instead (and wait
// for a worker that has it). The Claude Code envelope of harness-usage is checked with the real CLI
// (test/harness-claude.test.ts).
const SCRIPTED = {};

/** Runs a test started: cancelled after it (the scripted harness works until told otherwise). */
const started: string[] = [];
afterEach(async () => {
  for (const id of started.splice(0)) await python(t, 'POST', `/agent/runs/${id}/cancel`);
});

async function start(config: Record<string, unknown> = SCRIPTED): Promise<string> {
  const res = await python(t, 'POST', '/agent/runs', { prompt: 'Work until interrupted', config });
  expect(res.status).toBe(200);
  started.push(res.body.run_id);
  return res.body.run_id;
}

/** As the newest TypeScript client's getTranscript: Accept octet-stream, the redirect followed. */
async function transcript(runId: string): Promise<string> {
  const res = await fetch(`${t.api}/agent/runs/${runId}/transcript`, {
    headers: { authorization: `Bearer ${t.adminKey}`, accept: 'application/octet-stream' },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  return res.text();
}

describe('interrupt, usage and transcript through a scripted harness', () => {
  it.skipIf(twoTeamsRefused)(
    `interrupt → BLOCKED → follow-up → continues → SUCCEEDED; usage summed over two executions; the transcript in order${twoTeamsNote}`,
    async () => {
      // A run that has not started has no turn to stop (no worker serves this host: it stays QUEUED).
      const queued = await start({ ...SCRIPTED, worker_host: 'nobody-serves-this' });
      const early = await python(t, 'POST', `/agent/runs/${queued}/interrupt`);
      expect(early.status).toBe(409);
      expect(early.body).toMatchObject({ error: 'conflict', retryable: false });
      expect(early.body.detail).toMatch(/has not started \(QUEUED\)/);

      const runId = await start();
      await runIn(t, runId, ['INPROGRESS']);
      await eventually(async () => (await transcript(runId)).includes('working 2'), 'the harness at work');

      const interrupted = await python(t, 'POST', `/agent/runs/${runId}/interrupt`);
      expect(interrupted.status).toBe(202);
      expect(interrupted.body).toEqual({});
      const blocked = await runIn(t, runId, ['BLOCKED']);
      expect(blocked.status_message.message).toBe('interrupted; send a follow-up to continue');

      // BLOCKED: no turn in progress.
      const again = await python(t, 'POST', `/agent/runs/${runId}/interrupt`);
      expect(again.status).toBe(409);
      expect(again.body.error).toBe('conflict');
      expect(again.body.detail).toMatch(/waits for a follow-up/);

      expect((await python(t, 'POST', `/agent/runs/${runId}/followups`, { message: 'go on' })).status).toBe(
        200,
      );
      const done = await runIn(t, runId, ['SUCCEEDED']);
      expect(done.status_message.message).toBe('resumed and done');

      // Ended: 400, as cancel answers an ended run.
      const ended = await python(t, 'POST', `/agent/runs/${runId}/interrupt`);
      expect(ended.status).toBe(400);
      expect(ended.body.detail).toMatch(/has already ended \(SUCCEEDED\)/);

      // A second execution (a follow-up to the ended run) reports usage again: the run's sums grow.
      await python(t, 'POST', `/agent/runs/${runId}/followups`, { message: 'once more' });
      await eventually(async () => {
        const run = (await python(t, 'GET', `/agent/runs/${runId}`)).body;
        return run.state === 'SUCCEEDED' && run.status_message?.message === 'execution 2 done';
      }, 'the second execution done');

      const run = (await python(t, 'GET', `/agent/runs/${runId}`)).body;
      expect(run.request_usage).toEqual({
        model_token_usage: [
          { model_id: 'stub-model', total_tokens: 125 + 60 + 125, usage_type: 'byok' },
          { model_id: 'stub-small', total_tokens: 10, usage_type: 'byok' },
        ],
        total_tokens: 320,
      });
      // The list carries it too.
      const listed = (await python(t, 'GET', '/agent/runs?limit=5')).body.runs.find(
        (r: { run_id: string }) => r.run_id === runId,
      );
      expect(listed.request_usage.total_tokens).toBe(320);

      // An `oz` harness's usage has no CLI envelope: only the run's own sums above.
      const usage = await python(t, 'GET', `/agent/runs/${runId}/harness-usage`);
      expect(usage.status).toBe(200);
      expect(usage.body).toEqual({ available: false, run_id: runId, conversation_id: run.conversation_id });

      // The raw transcript: every line the harness printed on stderr, in order, both executions.
      const text = await transcript(runId);
      const order = [
        'execution 1: turn 1 started',
        'execution 1: working 1',
        'execution 1: working 2',
        'execution 1: interrupted',
        'execution 1: resumed with "go on"',
        'execution 2: turn 1 started',
        'execution 2: done',
      ].map((line) => text.indexOf(`${line}\n`));
      expect(order.every((at) => at >= 0)).toBe(true);
      expect([...order].sort((a, b) => a - b)).toEqual(order);
      // Protocol events are no transcript lines.
      expect(text).not.toContain('"type":"usage"');
      // Nor are they conversation: the usage went to the run's sums only.
      const conversation = (await python(t, 'GET', `/agent/runs/${runId}/conversation`)).body;
      expect(JSON.stringify(conversation)).not.toContain('stub-small');
    },
  );

  it.skipIf(twoTeamsRefused)(
    `the transcript is a 302 to a signed link that needs no key; a changed link, or one for another run, is 403${twoTeamsNote}`,
    async () => {
      const runId = await start();
      await runIn(t, runId, ['INPROGRESS']);
      const res = await python(t, 'GET', `/agent/runs/${runId}/transcript`);
      expect(res.status).toBe(302);
      const link = res.headers.get('location')!;
      expect(link).toMatch(
        new RegExp(`/api/v1/agent/runs/${runId}/transcript/download\\?expires=\\d+&signature=`),
      );
      await eventually(async () => {
        const plain = await fetch(link);
        expect(plain.status).toBe(200);
        return (await plain.text()).includes('execution 1: turn 1 started\n');
      }, 'the first line through the link');
      const forged = await fetch(forgedLink(link));
      expect(forged.status).toBe(403);
      // A link for this run does not open another run's transcript.
      const otherRun = await start();
      const moved = await fetch(link.replace(runId, otherRun));
      expect(moved.status).toBe(403);
    },
  );

  it('another team gets 404 on each new route of a run, like a run that does not exist', async () => {
    const runId = await start();
    // Interrupting changes the run: a key that may only read is refused.
    const reader = await t.newKey([t.defaultTeam], ['runs:read'], 'Reader');
    const refused = await python(t, 'POST', `/agent/runs/${runId}/interrupt`, undefined, reader);
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('not_authorized');
    for (const [method, path] of [
      ['POST', `/agent/runs/${runId}/interrupt`],
      ['GET', `/agent/runs/${runId}/transcript`],
      ['GET', `/agent/runs/${runId}/harness-usage`],
    ] as const) {
      const theirs = await python(t, method, path, undefined, other.key);
      expect(theirs.status, `${method} ${path}`).toBe(404);
      expect(theirs.body.error).toBe('resource_not_found');
      const unknown = await python(t, method, path.replace(runId, '00000000-0000-4000-8000-000000000000'));
      expect(unknown.status).toBe(404);
      expect(unknown.body.detail).toBe(
        theirs.body.detail.replace(runId, '00000000-0000-4000-8000-000000000000'),
      );
    }
  });

  it.skipIf(twoTeamsRefused)(
    `harness-usage is unavailable for a harness other than Claude Code or Codex${twoTeamsNote}`,
    async () => {
      const runId = await start();
      await runIn(t, runId, ['INPROGRESS']);
      const usage = await python(t, 'GET', `/agent/runs/${runId}/harness-usage`);
      expect(usage.body).toEqual({ available: false, run_id: runId, conversation_id: runId });
      // The run item still carries what was reported.
      await eventually(
        async () => (await python(t, 'GET', `/agent/runs/${runId}`)).body.request_usage?.total_tokens === 125,
        'the usage on the run',
      );
    },
  );
});

describe('run_token_usage', () => {
  it(`keeps at most ${MAX_MODELS_PER_RUN} models per run; those keep counting, further ones are dropped`, async () => {
    const runId = await start({ ...SCRIPTED, worker_host: 'nobody-serves-this' }); // QUEUED: execution 0
    const usage = new RunUsageRepository(t.service.db);
    const report = (model_id: string) => ({ model_id, input_tokens: 1, output_tokens: 1 });
    const many = Array.from({ length: MAX_MODELS_PER_RUN + 50 }, (_, i) =>
      report(`m-${String(i).padStart(3, '0')}`),
    );
    await usage.add(t.service.db, runId, 0, many, new Date());
    expect(await usage.forRun(runId)).toHaveLength(MAX_MODELS_PER_RUN);
    await usage.add(t.service.db, runId, 0, [report('m-000'), report('another')], new Date());
    const rows = await usage.forRun(runId);
    expect(rows).toHaveLength(MAX_MODELS_PER_RUN);
    expect(rows.find((r) => r.modelId === 'm-000')).toMatchObject({ inputTokens: 2, reports: 2 });
    expect(rows.some((r) => r.modelId === 'another')).toBe(false);
    // A report for another execution than the run's adds nothing.
    expect(await usage.add(t.service.db, runId, 7, [report('m-001')], new Date())).toBe(0);
  });
});

describe('GET /agent/models', () => {
  const models = async (key?: string) => {
    const res = await python(t, 'GET', '/agent/models', undefined, key);
    expect(res.status).toBe(200);
    return res.body as { default_model_id: string; models: any[] };
  };
  const claudeModel = async (key?: string) =>
    (await models(key)).models.find((m) => m.id === 'claude-stub-model');

  it('lists HARNESS_MODELS per harness; a harness whose CLI no connected worker has is ADMIN_DISABLED', async () => {
    // The service's own workers found no CLI (HARNESSES_DIR is an empty folder here) and no other
    // worker is connected.
    expect(await models()).toEqual({
      default_model_id: 'team-model',
      models: [
        {
          id: 'claude-stub-model',
          display_name: 'claude-stub-model',
          provider: 'ANTHROPIC',
          vision_supported: false,
          description: expect.stringMatching(
            /^claude harness; listed by the operator \(HARNESS_MODELS\); Claude Code is not installed/,
          ),
          disable_reason: 'ADMIN_DISABLED',
        },
        {
          id: 'team-model',
          display_name: 'team-model',
          provider: 'UNKNOWN',
          vision_supported: false,
          description: 'oz harness; listed by the operator (HARNESS_MODELS)',
        },
      ],
    });
    // Any team's key reads them (nothing in the list is another team's).
    expect((await python(t, 'GET', '/agent/models', undefined, other.key)).status).toBe(200);
  });

  it('a connected service-hosted worker that advertises Claude Code makes its models usable, for every team', async () => {
    const service = t.service.app.get(WorkerRunsService);
    const worker = {
      id: `claude-box-${Date.now()}`,
      host: 'warp',
      teamId: null,
      slots: 0,
      harnesses: [{ type: 'oz' }, { type: 'claude', version: '2.1.197 (Claude Code)' }],
    };
    await service.register(worker);
    try {
      const list = await models();
      expect(list.models[0]).toEqual({
        id: 'claude-stub-model',
        display_name: 'claude-stub-model',
        provider: 'ANTHROPIC',
        vision_supported: false,
        description:
          'claude harness (Claude Code 2.1.197 (Claude Code)); listed by the operator (HARNESS_MODELS)',
      });
      // The first usable one, in the operator's order.
      expect(list.default_model_id).toBe('claude-stub-model');
      expect((await claudeModel(other.key)).disable_reason).toBeUndefined();
    } finally {
      await service.unregister(worker);
    }
    expect((await claudeModel()).disable_reason).toBe('ADMIN_DISABLED');
  });

  it("a team's self-hosted worker counts for that team only, and only while it is connected", async () => {
    // The other team's own machine, connected over the worker API with its worker key.
    const key = await t.workerKey('claude-laptop', other.team);
    const connect = await fetch(`${t.api}/agent/workers/connect`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        worker_id: `laptop-${Date.now()}`,
        harnesses: [{ type: 'oz' }, { type: 'claude', version: '2.1.197 (Claude Code)' }],
      }),
    });
    expect(connect.status).toBe(200);
    const own = await claudeModel(other.key);
    expect(own.disable_reason).toBeUndefined();
    expect(own.description).toMatch(/^claude harness \(Claude Code 2\.1\.197 \(Claude Code\)\)/);
    // Not for the team whose runs it will never take.
    expect((await claudeModel()).disable_reason).toBe('ADMIN_DISABLED');
    // Once it is no longer seen (WORKER_LEASE_SECONDS), nor for its own team.
    await eventually(
      async () => (await claudeModel(other.key)).disable_reason === 'ADMIN_DISABLED',
      'the disconnected worker forgotten',
      { timeoutMs: 15_000 },
    );
  });
});

describe('a self-hosted worker', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-harness-api-'));
  let worker: ChildProcess | undefined;
  afterAll(() => {
    worker?.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('gets the interrupt through its control poll and reports usage over the worker API', async () => {
    // `factoryd worker` as its own process (the built code), connected to the API with a worker key.
    worker = spawn(
      process.execPath,
      [
        fromRoot('dist/cli/main.js'),
        'worker',
        '--worker-host',
        'interrupt-host',
        '--api',
        t.api,
        '--api-key',
        await t.workerKey('interrupt-host'),
      ],
      {
        env: {
          ...process.env,
          LOG_LEVEL: 'silent',
          WORKER_LEASE_SECONDS: '3',
          TMPDIR: dataDir,
          HARNESS_COMMAND,
        },
        stdio: 'ignore',
      },
    );
    const runId = await start({ ...SCRIPTED, worker_host: 'interrupt-host' });
    await runIn(t, runId, ['INPROGRESS']);
    await eventually(async () => (await transcript(runId)).includes('working 1'), 'the harness at work');
    expect((await python(t, 'POST', `/agent/runs/${runId}/interrupt`)).status).toBe(202);
    await runIn(t, runId, ['BLOCKED']);
    await python(t, 'POST', `/agent/runs/${runId}/followups`, { message: 'go on' });
    const done = await runIn(t, runId, ['SUCCEEDED']);
    expect(done.request_usage.model_token_usage).toEqual([
      { model_id: 'stub-model', total_tokens: 185, usage_type: 'byok' },
      { model_id: 'stub-small', total_tokens: 10, usage_type: 'byok' },
    ]);
  });
});
