import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './support/eventually.js';
import { startTestService, type TestService } from './support/service.js';

/** Every route of docs/run-api.md that the Run API serves, and every error it documents. */
let t: TestService;
beforeAll(async () => {
  // A revoked key is refused within API_KEY_CACHE_SECONDS: short, so the revocation test is quick.
  t = await startTestService({ API_KEY_CACHE_SECONDS: '1' });
});
afterAll(async () => t?.stop());

const RUNS = '/api/v1/agent/runs';

async function create(body: Record<string, unknown> = { prompt: 'Do the thing' }, key?: string) {
  const res = await t.call('POST', RUNS, body, key);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.run_id as string;
}

/** Sets a run's state behind the API's back: execution is a later issue. */
async function setState(runId: string, state: string) {
  await t.service.db.execute(`UPDATE runs SET state = $2 WHERE id = $1`, [runId, state]);
}

function expectProblem(res: { status: number; body: any; headers: Headers }, status: number, error: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status, error });
  expect(res.body.trace_id).toEqual(expect.any(String));
}

describe('POST /agent/runs and the alias /agent/run', () => {
  it('creates a QUEUED run and returns run_id, task_id, state with 200', async () => {
    const res = await t.call('POST', RUNS, { prompt: 'Fix the flaky test', metadata: { ci: 'yes' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ run_id: expect.any(String), task_id: res.body.run_id, state: 'QUEUED' });
    const got = await t.call('GET', `${RUNS}/${res.body.run_id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      run_id: res.body.run_id,
      task_id: res.body.run_id,
      title: 'Fix the flaky test',
      prompt: 'Fix the flaky test',
      state: 'QUEUED',
      source: 'API',
      metadata: { ci: 'yes' },
      conversation_id: res.body.run_id,
      execution_location: 'REMOTE',
      is_run_type_cancellable: true,
      creator: { type: 'user', uid: expect.any(String), display_name: 'admin' },
    });
    expect(got.body.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(got.body.updated_at).toMatch(/Z$/);
  });

  it('accepts the alias POST /agent/run', async () => {
    const res = await t.call('POST', '/api/v1/agent/run', { prompt: 'via alias', title: 'Alias' });
    expect(res.status).toBe(200);
    expect(res.body.state).toBe('QUEUED');
    const got = await t.call('GET', `${RUNS}/${res.body.run_id}`);
    expect(got.body).toMatchObject({ title: 'Alias', prompt: 'via alias' });
  });

  it('starts from a skill without a prompt: config name becomes the skill name', async () => {
    const id = await create({ skill: 'acme/tools:fix-lint' });
    const got = await t.call('GET', `${RUNS}/${id}`);
    expect(got.body.agent_config).toMatchObject({ skill_spec: 'acme/tools:fix-lint', name: 'fix-lint' });
    const id2 = await create({ skill: 'acme/tools:skills/review/SKILL.md', config: { model_id: 'm1' } });
    expect((await t.call('GET', `${RUNS}/${id2}`)).body.agent_config).toMatchObject({
      name: 'review',
      model_id: 'm1',
    });
  });

  it('stores attachments and images', async () => {
    const id = await create({
      prompt: 'look',
      attachments: [{ file_name: 'a.txt', data: Buffer.from('hello').toString('base64') }],
      images: [{ data: Buffer.from('png').toString('base64'), mime_type: 'image/png' }],
    });
    const rows = await t.service.db.query<{ file_name: string; content: Buffer }>(
      `SELECT file_name, content FROM run_attachments WHERE run_id = $1 ORDER BY file_name`,
      [id],
    );
    expect(rows.map((r) => [r.file_name, r.content.toString()])).toEqual([
      ['a.txt', 'hello'],
      ['image-1.png', 'png'],
    ]);
  });

  it('continues a conversation and links a parent run of the same team only', async () => {
    const first = await create();
    const second = await create({ prompt: 'more', conversation_id: first, parent_run_id: first });
    expect((await t.call('GET', `${RUNS}/${second}`)).body).toMatchObject({
      conversation_id: first,
      parent_run_id: first,
    });
    const other = await t.newTeam('conv-other');
    expectProblem(
      await t.call('POST', RUNS, { prompt: 'x', conversation_id: first }, other.key),
      404,
      'resource_not_found',
    );
    expectProblem(
      await t.call('POST', RUNS, { prompt: 'x', parent_run_id: first }, other.key),
      404,
      'resource_not_found',
    );
  });

  const invalid: Array<[string, Record<string, unknown>, string, RegExp]> = [
    ['no prompt and no skill', { title: 't' }, 'prompt', /prompt is required/],
    ['an empty prompt', { prompt: '' }, 'prompt', /prompt/],
    ['an unknown field', { prompt: 'x', colour: 'red' }, '', /colour is not a known field/],
    [
      'more than 20 metadata keys',
      { prompt: 'x', metadata: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v'])) },
      'metadata',
      /at most 20 keys/,
    ],
    [
      'a bad metadata key',
      { prompt: 'x', metadata: { 'bad key': 'v' } },
      'metadata',
      /invalid key "bad key"/,
    ],
    [
      'a metadata key of 65 characters',
      { prompt: 'x', metadata: { ['k'.repeat(65)]: 'v' } },
      'metadata',
      /invalid key/,
    ],
    [
      'a NUL in a metadata value',
      { prompt: 'x', metadata: { k: 'a\u0000b' } },
      'metadata.k',
      /NUL character/,
    ],
    [
      'a metadata value over 256 characters',
      { prompt: 'x', metadata: { k: 'v'.repeat(257) } },
      'metadata.k',
      /256/,
    ],
    [
      'a metadata value over 256 bytes in UTF-8 (200 × é)',
      { prompt: 'x', metadata: { k: 'é'.repeat(200) } },
      'metadata.k',
      /at most 256 bytes/,
    ],
    ['a non-string metadata value', { prompt: 'x', metadata: { k: 1 } }, 'metadata.k', /must be string/],
    ['config that is not an object', { prompt: 'x', config: 'fast' }, 'config', /must be object/],
    [
      'an unknown config field',
      { prompt: 'x', config: { speed: 1 } },
      'config',
      /config.speed is not a known/,
    ],
    ['a config name of the wrong type', { prompt: 'x', config: { name: 5 } }, 'config.name', /string/],
    [
      'an MCP server with both command and url',
      { prompt: 'x', config: { mcp_servers: { gh: { command: 'gh-mcp', url: 'https://mcp.example' } } } },
      'config.mcp_servers.gh',
      /exactly one/,
    ],
    [
      'an MCP server with neither command nor url',
      { prompt: 'x', config: { mcp_servers: { gh: { args: ['a'] } } } },
      'config.mcp_servers.gh',
      /exactly one/,
    ],
    [
      'idle_timeout_minutes 0',
      { prompt: 'x', config: { idle_timeout_minutes: 0 } },
      'config.idle_timeout_minutes',
      />= 1/,
    ],
    [
      'idle_timeout_minutes 61',
      { prompt: 'x', config: { idle_timeout_minutes: 61 } },
      'config.idle_timeout_minutes',
      /<= 60/,
    ],
    ['a bad skill spec', { skill: 'not a spec' }, 'skill', /must match/],
    ['a bad conversation_id', { prompt: 'x', conversation_id: 'abc' }, 'conversation_id', /uuid/],
    [
      'an attachment that is not base64',
      { prompt: 'x', attachments: [{ file_name: 'a.txt', data: '***' }] },
      'attachments.0.data',
      /base64/,
    ],
    [
      'an attachment named ..',
      { prompt: 'x', attachments: [{ file_name: '..', data: 'AA==' }] },
      'attachments.0.file_name',
      /must match .*\(1-128 letters, digits, '\.', '_' or '-', and not '\.' or '\.\.'\)/,
    ],
    [
      'an image of an unsupported type',
      { prompt: 'x', images: [{ data: 'AA==', mime_type: 'image/tiff' }] },
      'images.0.mime_type',
      /must be one of/,
    ],
  ];
  it.each(invalid)('rejects %s with 400 naming the field and rule', async (_name, body, field, rule) => {
    const res = await t.call('POST', RUNS, body);
    expectProblem(res, 400, 'invalid_request');
    expect(res.body.detail).toMatch(rule);
    expect(res.body.invalid_params).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: field, reason: expect.stringMatching(rule) })]),
    );
  });

  it('accepts the MCP server shapes and an idle timeout within range', async () => {
    const id = await create({
      prompt: 'x',
      config: {
        idle_timeout_minutes: 60,
        mcp_servers: {
          local: { command: 'gh-mcp', args: ['--stdio'], env: { A: 'b' } },
          remote: { url: 'https://mcp.example/sse', headers: { X: 'y' } },
        },
      },
    });
    expect((await t.call('GET', `${RUNS}/${id}`)).body.agent_config.mcp_servers.remote.url).toBe(
      'https://mcp.example/sse',
    );
  });

  it('answers a body that is not JSON with a problem+json 400', async () => {
    const res = await t.call('POST', RUNS, '{bad');
    expectProblem(res, 400, 'invalid_request');
  });
});

describe('authentication, scopes and tenant isolation', () => {
  it('answers a missing, malformed, unknown or revoked key with 401', async () => {
    expectProblem(await t.call('GET', RUNS, undefined, ''), 401, 'authentication_required');
    expectProblem(
      await t.call('GET', RUNS, undefined, '', { authorization: 'Basic abc' }),
      401,
      'authentication_required',
    );
    expectProblem(
      await t.call('GET', RUNS, undefined, 'fd_not_a_real_key_at_all_0000000000'),
      401,
      'authentication_required',
    );
    const key = await t.newKey([t.defaultTeam], ['runs:read'], 'to-revoke');
    expect((await t.call('GET', RUNS, undefined, key)).status).toBe(200);
    const listed = await t.authRepo.listKeys();
    const record = listed.find((k) => k.name === 'to-revoke')!;
    expect(await t.authRepo.revokeKey(record.id)).toBe(true);
    // Refused once the service stops trusting the key it verified (API_KEY_CACHE_SECONDS).
    const refused = await eventually(async () => {
      const res = await t.call('GET', RUNS, undefined, key);
      return res.status === 401 ? res : undefined;
    }, 'the revoked key to be refused');
    expectProblem(refused, 401, 'authentication_required');
  });

  it('answers a key without the route scope with 403', async () => {
    const reader = await t.newKey([t.defaultTeam], ['runs:read']);
    expectProblem(await t.call('POST', RUNS, { prompt: 'x' }, reader), 403, 'not_authorized');
    const id = await create();
    expectProblem(await t.call('POST', `${RUNS}/${id}/cancel`, undefined, reader), 403, 'not_authorized');
    expectProblem(
      await t.call('POST', `${RUNS}/${id}/followups`, { message: 'm' }, reader),
      403,
      'not_authorized',
    );
    const writer = await t.newKey([t.defaultTeam], ['runs:write']);
    expectProblem(await t.call('GET', RUNS, undefined, writer), 403, 'not_authorized');
    expectProblem(await t.call('GET', `${RUNS}/${id}`, undefined, writer), 403, 'not_authorized');
  });

  it("never shows, changes or continues another team's run (404)", async () => {
    const a = await t.newTeam('iso-a');
    const b = await t.newTeam('iso-b');
    const runA = await create({ prompt: 'team a secret work' }, a.key);
    expectProblem(await t.call('GET', `${RUNS}/${runA}`, undefined, b.key), 404, 'resource_not_found');
    expectProblem(
      await t.call('POST', `${RUNS}/${runA}/cancel`, undefined, b.key),
      404,
      'resource_not_found',
    );
    expectProblem(
      await t.call('POST', `${RUNS}/${runA}/followups`, { message: 'hi' }, b.key),
      404,
      'resource_not_found',
    );
    const listB = await t.call('GET', `${RUNS}?limit=500`, undefined, b.key);
    expect(listB.status).toBe(200);
    expect(listB.body.runs).toEqual([]);
    const listA = await t.call('GET', RUNS, undefined, a.key);
    expect(listA.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([runA]);
    // The run is untouched by b's attempts.
    const got = await t.call('GET', `${RUNS}/${runA}`, undefined, a.key);
    expect(got.body.state).toBe('QUEUED');
    const followups = await t.service.db.query(`SELECT 1 FROM run_followups WHERE run_id = $1`, [runA]);
    expect(followups).toHaveLength(0);
  });

  it('selects the team with X-Team-Uid for a key in two teams', async () => {
    const a = await t.newTeam('multi-a');
    const b = await t.newTeam('multi-b');
    const both = await t.newKey([a.team, b.team], ['runs:read', 'runs:write']);
    const missing = await t.call('GET', RUNS, undefined, both);
    expectProblem(missing, 400, 'invalid_request');
    expect(missing.body.detail).toMatch(/X-Team-Uid/);
    const inA = await t.call('POST', RUNS, { prompt: 'in a' }, both, { 'x-team-uid': a.team.uid });
    expect(inA.status).toBe(200);
    const listA = await t.call('GET', RUNS, undefined, a.key);
    expect(listA.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([inA.body.run_id]);
    const viaB = await t.call('GET', `${RUNS}/${inA.body.run_id}`, undefined, both, {
      'x-team-uid': b.team.uid,
    });
    expectProblem(viaB, 404, 'resource_not_found');
    const viaA = await t.call('GET', `${RUNS}/${inA.body.run_id}`, undefined, both, {
      'x-team-uid': a.team.uid,
    });
    expect(viaA.status).toBe(200);
    const other = await t.newTeam('multi-c');
    expectProblem(
      await t.call('GET', RUNS, undefined, both, { 'x-team-uid': other.team.uid }),
      403,
      'not_authorized',
    );
    expectProblem(
      await t.call('GET', RUNS, undefined, both, { 'x-team-uid': 'no-such-team' }),
      403,
      'not_authorized',
    );
  });
});

describe('GET /agent/runs/{runId}', () => {
  it('answers an unknown or malformed run id with 404', async () => {
    expectProblem(
      await t.call('GET', `${RUNS}/00000000-0000-4000-8000-000000000000`),
      404,
      'resource_not_found',
    );
    expectProblem(await t.call('GET', `${RUNS}/not-a-uuid`), 404, 'resource_not_found');
  });

  it('shows started_at, run_time and status_message once known', async () => {
    const id = await create();
    await t.service.db.execute(
      `UPDATE runs SET state = 'SUCCEEDED', started_at = '2026-01-01T10:00:00Z', ended_at = '2026-01-01T10:01:05.25Z',
              status_message = '{"message":"done"}' WHERE id = $1`,
      [id],
    );
    const got = await t.call('GET', `${RUNS}/${id}`);
    expect(got.body).toMatchObject({
      state: 'SUCCEEDED',
      started_at: '2026-01-01T10:00:00.000Z',
      run_time: 'PT1M5.25S',
      status_message: { message: 'done' },
      is_run_type_cancellable: false,
    });
  });
});

describe('POST /agent/runs/{runId}/cancel', () => {
  it('cancels a QUEUED run: 200 with the run id as a JSON string', async () => {
    const id = await create();
    const res = await fetch(`${t.api}/agent/runs/${id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.adminKey}` },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.text()).toBe(JSON.stringify(id));
    const got = await t.call('GET', `${RUNS}/${id}`);
    expect(got.body.state).toBe('CANCELLED');
    expect(got.body.status_message.message).toMatch(/Cancelled by/);
  });

  it.each(['CLAIMED', 'INPROGRESS', 'BLOCKED'])('cancels a %s run', async (state) => {
    const id = await create();
    await setState(id, state);
    const res = await t.call('POST', `${RUNS}/${id}/cancel`, {});
    expect(res.status).toBe(200);
    expect(res.body).toBe(id);
  });

  it.each(['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'])(
    'refuses to cancel a %s run with 400',
    async (state) => {
      const id = await create();
      await setState(id, state);
      const res = await t.call('POST', `${RUNS}/${id}/cancel`);
      expectProblem(res, 400, 'invalid_request');
      expect(res.body.detail).toMatch(state);
      expect((await t.call('GET', `${RUNS}/${id}`)).body.state).toBe(state);
    },
  );

  it('answers a PENDING run with 409, retryable', async () => {
    const id = await create();
    await setState(id, 'PENDING');
    const res = await t.call('POST', `${RUNS}/${id}/cancel`);
    expectProblem(res, 409, 'conflict');
    expect(res.body.retryable).toBe(true);
    expect((await t.call('GET', `${RUNS}/${id}`)).body.state).toBe('PENDING');
  });
});

describe('POST /agent/runs/{runId}/followups', () => {
  it('stores a follow-up for a live run and answers with it: its id, delivered to the live harness', async () => {
    const id = await create();
    await setState(id, 'INPROGRESS');
    const res = await t.call('POST', `${RUNS}/${id}/followups`, {
      message: 'also fix the docs',
      mode: 'plan',
    });
    expect(res.status).toBe(200);
    const rows = await t.service.db.query<{ id: string; message: string; mode: string }>(
      `SELECT id, message, mode FROM run_followups WHERE run_id = $1`,
      [id],
    );
    expect(rows).toEqual([{ id: expect.any(String), message: 'also fix the docs', mode: 'plan' }]);
    expect(res.body).toEqual({ followup_id: rows[0]!.id, outcome: 'live_session' });
    expect((await t.call('GET', `${RUNS}/${id}`)).body.state).toBe('INPROGRESS');
  });

  it.each(['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'])(
    'continues a %s run in the same conversation: back to QUEUED',
    async (state) => {
      const id = await create();
      await t.service.db.execute(
        `UPDATE runs SET state = $2, ended_at = now(), status_message = '{"message":"ended"}' WHERE id = $1`,
        [id, state],
      );
      const before = (await t.call('GET', `${RUNS}/${id}`)).body;
      const res = await t.call('POST', `${RUNS}/${id}/followups`, { message: 'one more thing' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ followup_id: expect.any(String), outcome: 'handoff_execution' });
      const after = (await t.call('GET', `${RUNS}/${id}`)).body;
      expect(after.state).toBe('QUEUED');
      expect(after.conversation_id).toBe(before.conversation_id);
      expect(after.status_message).toBeUndefined();
      expect(Date.parse(after.updated_at)).toBeGreaterThanOrEqual(Date.parse(before.updated_at));
      const rows = await t.service.db.query(`SELECT message FROM run_followups WHERE run_id = $1`, [id]);
      expect(rows).toEqual([{ message: 'one more thing' }]);
    },
  );

  it('takes a follow-up without a message (the Oz clients make it optional), refuses an unknown field', async () => {
    const id = await create();
    const res = await t.call('POST', `${RUNS}/${id}/followups`, {});
    expect(res.status).toBe(200);
    // Nothing stored: the QUEUED run just goes on waiting for a worker.
    expect(res.body).toEqual({ followup_id: null, outcome: 'queue_pending' });
    const empty = await t.call('POST', `${RUNS}/${id}/followups`, { message: '' });
    expectProblem(empty, 400, 'invalid_request');
    const extra = await t.call('POST', `${RUNS}/${id}/followups`, { message: 'x', urgent: true });
    expectProblem(extra, 400, 'invalid_request');
    expect(extra.body.detail).toMatch(/urgent is not a known field/);
    expectProblem(
      await t.call('POST', `${RUNS}/00000000-0000-4000-8000-000000000000/followups`, { message: 'x' }),
      404,
      'resource_not_found',
    );
  });
});

describe('errors outside the routes', () => {
  it('answers an unknown route with a problem+json 404', async () => {
    const res = await t.call('GET', '/api/v1/no/such/route');
    expectProblem(res, 404, 'resource_not_found');
    expect(res.body.detail).toBe('No route GET /api/v1/no/such/route.');
  });

  it('answers a failure inside with a generic 500 that leaks nothing', async () => {
    const id = await create();
    // A real fault: the table the follow-up goes to is gone.
    await t.service.db.execute(`ALTER TABLE run_followups RENAME TO run_followups_hidden`);
    try {
      const res = await t.call('POST', `${RUNS}/${id}/followups`, { message: 'x' });
      expectProblem(res, 500, 'internal_error');
      expect(Object.keys(res.body).sort()).toEqual(
        ['detail', 'error', 'instance', 'retryable', 'status', 'title', 'trace_id', 'type'].sort(),
      );
      expect(res.body.detail).toBe(
        `Something went wrong on our side; quote trace id ${res.body.trace_id} when reporting it.`,
      );
      expect(JSON.stringify(res.body)).not.toMatch(/relation|run_followups|postgres|stack|at /i);
      expect(res.headers.get('x-request-id')).toBe(res.body.trace_id);
    } finally {
      await t.service.db.execute(`ALTER TABLE run_followups_hidden RENAME TO run_followups`);
    }
    expect((await t.call('POST', `${RUNS}/${id}/followups`, { message: 'x' })).status).toBe(200);
  });
});
