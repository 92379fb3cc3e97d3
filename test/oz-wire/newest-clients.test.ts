import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ScheduleFiring } from '../../src/schedules/schedule-firing.js';
import { runIn, startTestService, type TestService } from '../support/service.js';
import { acmeFactory, python, typescript } from './support.js';

// Requests shaped as the newest official clients send them (TypeScript oz-agent-sdk with `factories`
// and about 70 methods; Python up to 0.16), against a real factoryd with a service-hosted worker
// running the example harness; the answers read back with the clients' field names and enums.
let t: TestService;
let factory: { uid: string; folder: string };
beforeAll(async () => {
  t = await startTestService({ WORKER_CONCURRENCY: '1' });
  factory = await acmeFactory(t);
});
afterAll(async () => {
  await t?.stop();
  rmSync(factory?.folder ?? '/nonexistent', { recursive: true, force: true });
});

/** Runs no worker serves: they stay QUEUED until a test moves them. */
const PARKED = { worker_host: 'parked-host' };

/** The clients' ErrorCode: the only values `status_message.error_code` may take. */
const ERROR_CODES = [
  'insufficient_credits',
  'feature_not_available',
  'external_authentication_required',
  'not_authorized',
  'invalid_request',
  'resource_not_found',
  'budget_exceeded',
  'integration_disabled',
  'integration_not_configured',
  'operation_not_supported',
  'environment_setup_failed',
  'content_policy_violation',
  'conflict',
  'authentication_required',
  'resource_unavailable',
  'internal_error',
];

async function created(body: Record<string, unknown>, key?: string): Promise<string> {
  const res = await python(t, 'POST', '/agent/runs', body, key);
  expect(res.status).toBe(200);
  return res.body.run_id;
}

const ids = async (query: string, key?: string) => {
  const res = await python(t, 'GET', `/agent/runs?${query}&limit=500`, undefined, key);
  expect(res.status).toBe(200);
  return res.body.runs.map((r: any) => r.run_id).sort();
};

describe('runs.cancel from the Python client (item 1)', () => {
  it('answers the run id as a JSON string, which json.loads turns into the id the Python client should return', async () => {
    const id = await created({ prompt: 'Cancel me', config: PARKED });
    const res = await python(t, 'POST', `/agent/runs/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    // The Python client returns `response.text` for a `str` response: the quoted id.
    expect(res.text).toBe(`"${id}"`);
    expect(JSON.parse(res.text)).toBe(id);
  });
});

describe('status_message.error_code (item 2)', () => {
  it('a FAILED run reports factoryd’s reason beside the clients’ enum, never a value outside it', async () => {
    const id = await created({ prompt: '/fail the tests are red' });
    const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED']);
    expect(run.state).toBe('FAILED');
    const item = (await python(t, 'GET', `/agent/runs/${id}`)).body;
    expect(item.status_message).toMatchObject({ reason: 'agent_failed' });
    expect(item.status_message.message).toContain('the tests are red');
    // The agent failing is no platform or input error of the enum: no error_code.
    expect(item.status_message).not.toHaveProperty('error_code');
    for (const r of (await python(t, 'GET', '/agent/runs?limit=500')).body.runs)
      if (r.status_message?.error_code) expect(ERROR_CODES).toContain(r.status_message.error_code);
  });
});

describe('config.skills read back as skill_spec (item 3)', () => {
  it('a run created with skills names the first as skill_spec, and the list finds it by it', async () => {
    const skills = ['acme/factory:skills/triage/SKILL.md', 'acme/factory:skills/release/SKILL.md'];
    const id = await created({ prompt: 'Triage', config: { ...PARKED, skills } });
    const item = (await typescript(t, 'GET', `/agent/runs/${id}`)).body;
    expect(item.agent_config).toMatchObject({ skills, skill_spec: skills[0], name: 'triage' });
    expect(await ids(`skill_spec=${encodeURIComponent(skills[0]!)}`)).toContain(id);
    // A skill_spec of its own stays as given.
    const own = await created({ prompt: 'Own', config: { ...PARKED, skills, skill_spec: 'acme/x:y' } });
    expect((await python(t, 'GET', `/agent/runs/${own}`)).body.agent_config.skill_spec).toBe('acme/x:y');
  });
});

describe('factory_uid and factory_only (items 4 and 7)', () => {
  it('lists the runs an agent of the factory executed: a named agent linked to it, its foreman; never the caller’s metadata', async () => {
    const linked = await python(t, 'POST', '/agent/identities', {
      name: 'linked-agent',
      factory_uid: factory.uid,
      worker_host: PARKED.worker_host,
    });
    expect(linked.status).toBe(201);
    const byLinked = await created({ prompt: 'As the linked agent', agent_identity_uid: linked.body.uid });
    const dispatched = (
      await python(t, 'POST', `/factory/${factory.uid}/runs`, { prompt: 'For the foreman' })
    ).body.run_id;
    const claimed = await created({
      prompt: 'Claims it',
      metadata: { factory_uid: factory.uid },
      config: PARKED,
    });

    expect(await ids(`factory_uid=${factory.uid}`)).toEqual([byLinked, dispatched].sort());
    const item = (await python(t, 'GET', `/agent/runs/${byLinked}`)).body;
    expect(item).toMatchObject({ factory_uid: factory.uid, executor: { uid: linked.body.uid } });
    expect((await python(t, 'GET', `/agent/runs/${claimed}`)).body).not.toHaveProperty('factory_uid');

    // Repeated, as the clients send an array; a UID of no factory matches nothing.
    expect(await ids(`factory_uid=${factory.uid}&factory_uid=NoSuchFactory0000000000`)).toEqual(
      [byLinked, dispatched].sort(),
    );
    expect(await ids('factory_uid=NoSuchFactory0000000000')).toEqual([]);
    const factoryOnly = await ids('factory_only=true');
    expect(factoryOnly).toEqual(expect.arrayContaining([byLinked, dispatched]));
    expect(factoryOnly).not.toContain(claimed);
    expect(await ids('factory_only=false')).toContain(claimed);
    const bad = await python(t, 'GET', '/agent/runs?factory_only=yes');
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params).toEqual([
      { name: 'factory_only', reason: expect.stringContaining('true or false') },
    ]);
  });
});

describe('list filters as the newest clients send them (item 7)', () => {
  it('takes a repeated source, the newest enum’s values, and refuses a value outside it naming source', async () => {
    const api = await created({ prompt: 'From the API', config: PARKED });
    const dispatched = (await python(t, 'POST', `/factory/${factory.uid}/runs`, { prompt: 'Foreman' })).body
      .run_id;
    const both = await ids('source=API&source=FACTORY');
    expect(both).toEqual(expect.arrayContaining([api, dispatched]));
    expect(await ids('source=FACTORY')).not.toContain(api);
    expect(await ids('source=BENCHMARK_TRIAL&source=TEAMS')).toEqual([]);
    const bad = await python(t, 'GET', '/agent/runs?source=API&source=SOMEWHERE');
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params[0]).toMatchObject({ name: 'source' });
  });

  it('task_status: running when the run or a descendant is live, else by the run’s own state', async () => {
    const root = await created({ prompt: 'Root', config: PARKED });
    const child = await created({ prompt: 'Child', parent_run_id: root, config: PARKED });
    const done = await created({ prompt: 'Done', config: PARKED });
    const failed = await created({ prompt: 'Failed', config: PARKED });
    const errored = await created({ prompt: 'Errored', config: PARKED });
    const blocked = await created({ prompt: 'Blocked', config: PARKED });
    const set = (id: string, state: string) =>
      t.service.db.execute(`UPDATE runs SET state = $2, ended_at = now() WHERE id = $1`, [id, state]);
    await set(root, 'SUCCEEDED');
    await set(done, 'SUCCEEDED');
    await set(failed, 'FAILED');
    await set(errored, 'ERROR');
    await set(blocked, 'BLOCKED');
    const mine = [root, child, done, failed, errored, blocked];
    const within = async (query: string) =>
      (await ids(`task_status=${query}`)).filter((id: string) => mine.includes(id));

    // The root ended, but its child is still queued: the task is running.
    expect(await within('running')).toEqual([root, child].sort());
    expect(await within('complete')).toEqual([root, done].sort());
    expect(await within('failed')).toEqual([failed, errored].sort());
    expect(await within('blocked&task_status=failed')).toEqual([blocked, failed, errored].sort());
    await set(child, 'CANCELLED');
    expect(await within('running')).toEqual([]);
    expect(await within('cancelled')).toEqual([child]);

    const bad = await python(t, 'GET', '/agent/runs?task_status=stuck');
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params[0]).toMatchObject({ name: 'task_status' });
    expect(bad.body.detail).toContain('running, failed, blocked, cancelled, complete');
  });

  it('q finds a run by its id or its URL, besides the text of its title, prompt and skill', async () => {
    const id = await created({ prompt: 'Find me by id', config: PARKED });
    const link = (await python(t, 'GET', `/agent/runs/${id}`)).body.session_link ?? `${t.url}/ui/runs/${id}`;
    expect(await ids(`q=${id}`)).toEqual([id]);
    expect(await ids(`q=${encodeURIComponent(link)}`)).toEqual([id]);
    expect(await ids(`q=${encodeURIComponent('by id')}`)).toContain(id);
  });
});

describe('scheduled runs carry their schedule (item 6)', () => {
  it('as it was when the schedule fired, whatever it became since', async () => {
    const schedule = await python(t, 'POST', '/agent/schedules', {
      name: 'Nightly triage',
      cron_schedule: '0 3 * * *',
      prompt: 'Triage the night’s issues',
      agent_config: PARKED,
    });
    expect(schedule.status).toBe(200);
    expect(await t.service.app.get(ScheduleFiring).fireDue(new Date('2099-01-01T03:00:00Z'))).toBe(1);
    const [run] = await ids(`schedule_id=${schedule.body.id}`);
    expect(
      (
        await python(t, 'PUT', `/agent/schedules/${schedule.body.id}`, {
          name: 'Renamed',
          cron_schedule: '@hourly',
          enabled: true,
        })
      ).status,
    ).toBe(200);
    const item = (await typescript(t, 'GET', `/agent/runs/${run}`)).body;
    expect(item).toMatchObject({
      source: 'SCHEDULED_AGENT',
      schedule: {
        schedule_id: schedule.body.id,
        schedule_name: 'Nightly triage',
        cron_schedule: '0 3 * * *',
      },
    });
    // A run no schedule fired has none, whatever its metadata says.
    const other = await created({
      prompt: 'Not scheduled',
      metadata: { schedule_id: schedule.body.id },
      config: PARKED,
    });
    expect((await python(t, 'GET', `/agent/runs/${other}`)).body).not.toHaveProperty('schedule');
  });
});

describe('factories.runs.create with a ticket (item 8)', () => {
  it('stores ticket_ref and ticket_url on the run and echoes them, with the run’s URL', async () => {
    const res = await python(t, 'POST', `/factory/${factory.uid}/runs`, {
      prompt: 'Fix OPS-7',
      ticket_ref: 'linear:OPS-7',
      ticket_url: 'https://linear.app/acme/issue/OPS-7',
      title: 'OPS-7',
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      factory_uid: factory.uid,
      foreman_agent: 'lead',
      run_id: expect.any(String),
      state: 'QUEUED',
      ticket_ref: 'linear:OPS-7',
      ticket_url: 'https://linear.app/acme/issue/OPS-7',
      run_url: `${t.url}/ui/runs/${res.body.run_id}`,
    });
    const item = (await python(t, 'GET', `/agent/runs/${res.body.run_id}`)).body;
    expect(item.metadata).toEqual({
      factory_uid: factory.uid,
      ticket_source: 'linear',
      ticket_id: 'OPS-7',
      ticket_url: 'https://linear.app/acme/issue/OPS-7',
    });
    expect(await ids('metadata[ticket_id]=OPS-7')).toEqual([res.body.run_id]);

    const adhoc = await typescript(t, 'POST', `/factory/${factory.uid}/runs`, { prompt: 'No ticket' });
    expect(adhoc.body.ticket_ref).toMatch(/^adhoc:[A-Za-z0-9]{22}$/);
    expect((await python(t, 'GET', `/agent/runs/${adhoc.body.run_id}`)).body.metadata).toMatchObject({
      ticket_source: 'adhoc',
      ticket_id: adhoc.body.ticket_ref.slice('adhoc:'.length),
    });

    for (const [body, field] of [
      [{ prompt: 'x', ticket_ref: 'OPS-7' }, 'ticket_ref'],
      [{ prompt: 'x', ticket_ref: 'linear:has space' }, 'ticket_ref'],
      [{ prompt: 'x', ticket_url: 'ftp://tickets/7' }, 'ticket_url'],
    ] as const) {
      const bad = await python(t, 'POST', `/factory/${factory.uid}/runs`, body);
      expect(bad.status).toBe(400);
      expect(bad.body.invalid_params[0].name).toBe(field);
    }
  });

  it('refuses a ticket id over the clients’ 256 bytes of metadata, naming ticket_ref, and starts no run', async () => {
    // 200 × é: 207 characters, within the schema's maxLength, but 400 bytes of UTF-8 as metadata.ticket_id.
    const before = await ids('metadata[ticket_source]=linear');
    const bad = await python(t, 'POST', `/factory/${factory.uid}/runs`, {
      prompt: 'Fix it',
      ticket_ref: `linear:${'é'.repeat(200)}`,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params).toEqual([
      {
        name: 'ticket_ref',
        reason: 'metadata.ticket_id (from ticket_ref) must be at most 256 bytes (UTF-8), got 400',
      },
    ]);
    expect(await ids('metadata[ticket_source]=linear')).toEqual(before);
    // 128 × é is 256 bytes: the bound itself is fine.
    const edge = await python(t, 'POST', `/factory/${factory.uid}/runs`, {
      prompt: 'Fix it',
      ticket_ref: `linear:${'é'.repeat(128)}`,
    });
    expect(edge.status).toBe(200);
  });
});

describe('the newest shapes: RunItem, timeline, conversation, follow-up', () => {
  it('a run from start to end: finished_at and root_run_id, the timeline’s events, the conversation’s steps', async () => {
    const id = await created({ prompt: 'Say hello' });
    const child = await created({ prompt: 'Child', parent_run_id: id, config: PARKED });
    const grandchild = await created({ prompt: 'Grandchild', parent_run_id: child, config: PARKED });
    const live = (await python(t, 'GET', `/agent/runs/${child}`)).body;
    expect(live).toMatchObject({ finished_at: null, root_run_id: id, parent_run_id: id });
    expect((await python(t, 'GET', `/agent/runs/${grandchild}`)).body.root_run_id).toBe(id);

    const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(run.root_run_id).toBe(id);
    expect(Date.parse(run.finished_at)).toBeGreaterThanOrEqual(Date.parse(run.started_at));

    const timeline = (await typescript(t, 'GET', `/agent/runs/${id}/timeline`)).body;
    expect(timeline.events.map((e: any) => e.event_type)).toEqual([
      'oz_run_created',
      'oz_run_claimed',
      'agent_started',
      'oz_run_done',
    ]);
    for (const e of timeline.events) {
      expect(e).toMatchObject({ event_uuid: expect.stringMatching(/^[0-9a-f-]{36}$/), run_id: id });
      expect(Date.parse(e.occurred_at)).not.toBeNaN();
    }
    expect(timeline.events[1]).toMatchObject({
      execution_id: 1,
      payload: { state: 'CLAIMED', worker_id: expect.any(String) },
    });
    expect(timeline.events[0]).not.toHaveProperty('execution_id');
    // The same change keeps its id from read to read.
    const again = (await typescript(t, 'GET', `/agent/runs/${id}/timeline`)).body;
    expect(again.events.map((e: any) => e.event_uuid)).toEqual(timeline.events.map((e: any) => e.event_uuid));
    expect(timeline.timeline.map((e: any) => e.event)).toEqual(['queued', 'claimed', 'started', 'ended']);

    const conversation = (await typescript(t, 'GET', `/agent/runs/${id}/conversation`)).body;
    expect(conversation.conversation_id).toBe(id);
    expect(conversation.steps).toHaveLength(1);
    const [step] = conversation.steps;
    expect(step).toMatchObject({ id: expect.any(String), steps: [] });
    expect(step.messages[0]).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'Say hello' }] });
    expect(step.messages.map((m: any) => m.role)).toContain('assistant');
    for (const m of step.messages) {
      expect(['user', 'assistant', 'tool', 'system']).toContain(m.role);
      for (const c of m.content) expect(['text', 'action', 'action_result', 'event']).toContain(c.type);
    }
    // factoryd's flat list is kept beside it.
    expect(conversation.messages[0]).toMatchObject({
      type: 'message',
      role: 'user',
      text: 'Say hello',
      execution: 1,
    });

    // A follow-up continues the ended run in a new execution.
    const followup = await python(t, 'POST', `/agent/runs/${id}/followups`, { message: 'And goodbye' });
    expect(followup.body).toEqual({
      followup_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      outcome: 'handoff_execution',
    });
    const continued = (await python(t, 'GET', `/agent/runs/${id}`)).body;
    expect(continued.finished_at).toBeNull();
  });

  it('a follow-up to a run at work reaches its live harness; one to a queued run waits for its start', async () => {
    const working = await created({ prompt: '/wait 30' });
    await runIn(t, working, ['INPROGRESS']);
    const live = await typescript(t, 'POST', `/agent/runs/${working}/followups`, {
      message: 'Faster',
      mode: 'plan',
    });
    expect(live.body).toEqual({ followup_id: expect.any(String), outcome: 'live_session' });
    await python(t, 'POST', `/agent/runs/${working}/cancel`);
    const queued = await created({ prompt: 'Later', config: PARKED });
    expect(
      (await python(t, 'POST', `/agent/runs/${queued}/followups`, { message: 'Also this' })).body,
    ).toEqual({
      followup_id: expect.any(String),
      outcome: 'queue_pending',
    });
  });
});

describe('methods not served yet (docs/run-api.md, "Every client method")', () => {
  it('answer a 404 problem, and a follow-up with attachments a 400 that names them', async () => {
    const id = await created({ prompt: 'Not served', config: PARKED });
    for (const [method, path, body] of [
      ['GET', `/agent/conversations/${id}`],
      ['POST', `/agent/conversations/${id}/followups`, { message: 'x' }],
      ['GET', '/networking/egress-ranges'],
      ['GET', `/factory/${factory.uid}/tasks`],
      ['GET', '/factory/scorers'],
      ['GET', `/factory/${factory.uid}/benchmarks/suites`],
      ['POST', '/factory-files/validate', { files: [{ path: 'factory.yaml', content: 'name: x' }] }],
      ['GET', '/factory-inbox'],
    ] as const) {
      const res = await typescript(t, method, path, body);
      expect({ path, status: res.status, error: res.body?.error }).toEqual({
        path,
        status: 404,
        error: 'resource_not_found',
      });
    }
    const withFiles = await typescript(t, 'POST', `/agent/runs/${id}/followups`, {
      message: 'See the file',
      attachments: [{ attachment_id: '6d0c1c2e-1111-4222-8333-444455556666' }],
    });
    expect(withFiles.status).toBe(400);
    expect(withFiles.body.detail).toContain('attachments is not a known field');
  });
});

describe('factories.list / factories.get as the clients’ Factory', () => {
  it('has every field their Factory requires, with their enums, and factoryd’s status beside them', async () => {
    const got = await python(t, 'GET', `/factory/${factory.uid}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      uid: factory.uid,
      name: 'acme',
      team_uid: t.defaultTeam.uid,
      alias: null,
      avatar_url: null,
      code_forge: 'NONE',
      code_forges: ['NONE'],
      repositories: [],
      credential_strategy: 'EXECUTOR',
      default_environment: 'env-acme',
      default_model: null,
      description: null,
      integrations: null,
      scorer_defaults: {},
      scoring: { default_model: null },
      agent_defaults: { default_runner_uid: '', mcp_servers: {}, secrets: [], worker_host: '' },
      ready: true,
      last_applied_revision: expect.stringMatching(/^[0-9a-f]{40}$/),
    });
    for (const at of ['created_at', 'updated_at']) expect(Date.parse(got.body[at])).not.toBeNaN();
    const listed = (await typescript(t, 'GET', '/factory?search=acm')).body;
    expect(listed.factories).toEqual([got.body]);
    // The team filter: the TypeScript client's filter_team_uid, the Python client's team_uid.
    const own = await typescript(t, 'GET', `/factory?filter_team_uid=${t.defaultTeam.uid}`);
    expect(own.body.factories.map((f: any) => f.uid)).toContain(factory.uid);
    const other = await python(t, 'GET', '/factory?team_uid=SomeOtherTeam000000000');
    expect(other.body).toEqual({ factories: [], page_info: { has_next_page: false } });
  });
});

describe('X-Warp-Team-Uid, the header the clients send for team_uid', () => {
  it('selects the team of a key in several, as X-Team-Uid does', async () => {
    const { team } = await t.newTeam('second-team');
    const key = await t.newKey([t.defaultTeam, team], ['runs:read', 'runs:write']);
    const unpicked = await typescript(t, 'GET', '/agent/runs', undefined, key);
    expect(unpicked.status).toBe(400);
    const there = await created({ prompt: 'In the second team', config: PARKED }, undefined);
    const picked = await typescript(t, 'GET', '/agent/runs?limit=500', undefined, key, {
      'x-warp-team-uid': team.uid,
    });
    expect(picked.status).toBe(200);
    expect(picked.body.runs).toEqual([]);
    const home = await typescript(t, 'GET', '/agent/runs?limit=500', undefined, key, {
      'x-warp-team-uid': t.defaultTeam.uid,
    });
    expect(home.body.runs.map((r: any) => r.run_id)).toContain(there);
  });
});

describe('factories.files.schemas: the definition schemas without a key', () => {
  it('lists the version, serves its bundle and each document', async () => {
    const list = (await typescript(t, 'GET', '/factory-files/schemas', undefined, null)).body;
    expect(list).toMatchObject({
      current_version: 'v1alpha1',
      versions: [{ schema_version: 'v1alpha1', schema_url: '/api/v1/factory-files/schemas/v1alpha1' }],
    });
    const bundle = (await typescript(t, 'GET', '/factory-files/schemas/v1alpha1', undefined, null)).body;
    expect(bundle.schema_version).toBe('v1alpha1');
    expect(Object.keys(bundle.documents)).toEqual(
      expect.arrayContaining(['factory.schema.json', 'webhook.schema.json']),
    );
    const one = await typescript(
      t,
      'GET',
      '/factory-files/schemas/v1alpha1/factory.schema.json',
      undefined,
      null,
    );
    expect(one.body).toEqual(bundle.documents['factory.schema.json']);
    expect(
      (await typescript(t, 'GET', '/factory-files/schemas/v9/factory.schema.json', undefined, null)).status,
    ).toBe(404);
    const none = await typescript(t, 'GET', '/factory-files/schemas/v1alpha1/nope.json', undefined, null);
    expect(none.status).toBe(404);
    expect(none.body.detail).toContain('factory.schema.json');
  });
});
