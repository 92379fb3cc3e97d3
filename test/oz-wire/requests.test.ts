import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../support/service.js';
import { acmeFactory, python, typescript } from './support.js';

// Every request the official clients (TypeScript oz-agent-sdk 1.4.0-alpha.6, Python 0.11.0) can send
// outside schedules, shaped as they shape it, against a real factoryd; the answers read back with
// the clients' field names and enums. Artifacts and handoff files: artifacts.test.ts beside this.
let t: TestService;
let factory: { uid: string; folder: string };
let me: string;
beforeAll(async () => {
  t = await startTestService();
  factory = await acmeFactory(t);
  const [p] = await t.service.db.query<{ uid: string }>(
    `SELECT p.uid FROM principals p JOIN api_keys k ON k.principal_id = p.id ORDER BY k.created_at LIMIT 1`,
  );
  me = p!.uid;
});
afterAll(async () => {
  await t?.stop();
  rmSync(factory?.folder ?? '/nonexistent', { recursive: true, force: true });
});

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** Every field of AmbientAgentConfig as client 1.4.0-alpha.6 types it. */
const FULL_CONFIG = {
  base_prompt: 'Be brief.',
  computer_use_enabled: true,
  computer_use_model_id: 'cu-model',
  credential_strategy: 'CREATOR',
  environment_id: 'env-full',
  harness: { model_id: 'claude-haiku-4-5', reasoning_level: 'high', type: 'claude' },
  harness_auth_secrets: { claude_auth_secret_name: 'claude-key', codex_auth_secret_name: 'codex-key' },
  idle_timeout_minutes: 30,
  inference_providers: { aws: { disabled: false, region: 'eu-west-1', role_arn: 'arn:aws:iam::1:role/x' } },
  mcp_servers: {
    linear: { warp_id: 'linear' },
    local: { command: 'mcp-local', args: ['--stdio'], env: { TOKEN: 'env-secret' } },
    remote: { url: 'https://mcp.example/x', headers: { Authorization: 'Bearer header-secret' } },
  },
  memory_stores: [{ access: 'read_only', instructions: 'Use it for context', uid: 'store-1' }],
  model_id: 'model-full',
  name: 'full-config',
  runner_id: 'runner-1',
  session_sharing: { public_access: 'VIEWER' },
  skill_spec: 'acme/factory:skills/triage/SKILL.md',
  worker_host: 'box-1',
};

describe('client.agent.run (POST /agent/runs)', () => {
  it('accepts every field the clients send and stores what it means', async () => {
    const parent = await python(t, 'POST', '/agent/runs', { prompt: 'Parent' });
    expect(parent.status).toBe(200);
    const identity = await python(t, 'POST', '/agent/identities', {
      name: 'reviewer',
      base_model: 'id-model',
    });
    expect(identity.status).toBe(201);

    const res = await python(t, 'POST', '/agent/runs', {
      agent_identity_uid: identity.body.uid,
      attachments: [{ data: b64('hello'), file_name: 'note.txt', mime_type: 'text/plain' }],
      config: FULL_CONFIG,
      conversation_id: parent.body.run_id,
      interactive: true,
      metadata: { ticket: 'OPS-1' },
      mode: 'plan',
      on_behalf_of: me,
      parent_run_id: parent.body.run_id,
      prompt: 'Review the change',
      skill: 'acme/factory:skills/triage/SKILL.md',
      team: true,
      title: 'Full request',
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ run_id: expect.any(String), task_id: res.body.run_id, state: 'QUEUED' });

    const run = (await python(t, 'GET', `/agent/runs/${res.body.run_id}`)).body;
    expect(run).toMatchObject({
      title: 'Full request',
      prompt: 'Review the change',
      state: 'QUEUED',
      source: 'API',
      conversation_id: parent.body.run_id,
      parent_run_id: parent.body.run_id,
      metadata: { ticket: 'OPS-1' },
      execution_location: 'REMOTE',
      creator: { uid: me },
      executor: { type: 'service_account', uid: identity.body.uid, display_name: 'reviewer' },
    });
    // The run's own config wins over the named agent's; credentials stay sealed in every read.
    const { mcp_servers: mcp, ...config } = FULL_CONFIG;
    expect(run.agent_config).toMatchObject(config);
    expect(run.agent_config.mcp_servers).toEqual({
      linear: { warp_id: 'linear' },
      local: { command: 'mcp-local', args: ['--stdio'], env: { TOKEN: '[redacted]' } },
      remote: { url: 'https://mcp.example/x', headers: { Authorization: '[redacted]' } },
    });
    expect(mcp.linear).toBeDefined();
    const [att] = await t.service.db.query(
      `SELECT content_type, content FROM run_attachments WHERE run_id = $1`,
      [res.body.run_id],
    );
    expect(att).toMatchObject({ content_type: 'text/plain' });
    expect(att!.content.toString()).toBe('hello');
  });

  it('takes a named agent’s defaults for what the run leaves unset', async () => {
    const agent = await python(t, 'POST', '/agent/identities', {
      name: 'nightly',
      base_model: 'agent-model',
      environment_id: 'env-agent',
      worker_host: 'box-2',
      prompt: 'You check dependencies.',
      skills: ['acme/factory:skills/triage/SKILL.md'],
      default_runner_uid: 'runner-9',
      harness: { type: 'codex' },
      mcp_servers: {
        gh: { url: 'https://mcp.example/gh', headers: { Authorization: 'Bearer agent-secret' } },
      },
      memory: { attached_stores: [{ access: 'read_write', instructions: 'notes', uid: 'store-2' }] },
    });
    const res = await python(t, 'POST', '/agent/runs', {
      agent_identity_uid: agent.body.uid,
      config: { model_id: 'run-model' },
    });
    expect(res.status).toBe(200);
    const run = (await python(t, 'GET', `/agent/runs/${res.body.run_id}`)).body;
    expect(run.agent_config).toEqual({
      name: 'nightly',
      model_id: 'run-model',
      base_prompt: 'You check dependencies.',
      environment_id: 'env-agent',
      worker_host: 'box-2',
      runner_id: 'runner-9',
      harness: { type: 'codex' },
      skills: ['acme/factory:skills/triage/SKILL.md'],
      skill_spec: 'acme/factory:skills/triage/SKILL.md',
      memory_stores: [{ access: 'read_write', instructions: 'notes', uid: 'store-2' }],
      mcp_servers: { gh: { url: 'https://mcp.example/gh', headers: { Authorization: '[redacted]' } } },
    });
    // A run that only picks the model keeps the agent's harness type (and its key's secret).
    const withModel = await python(t, 'POST', '/agent/runs', {
      agent_identity_uid: agent.body.uid,
      config: { harness: { model_id: 'gpt-5-codex' } },
    });
    expect(withModel.status).toBe(200);
    expect(
      (await python(t, 'GET', `/agent/runs/${withModel.body.run_id}`)).body.agent_config.harness,
    ).toEqual({
      type: 'codex',
      model_id: 'gpt-5-codex',
    });
    // The harness gets the agent's real MCP credentials (sealed for the run, opened for its worker).
    const [row] = await t.service.db.query<{ agent_config: any }>(
      `SELECT agent_config FROM runs WHERE id = $1`,
      [res.body.run_id],
    );
    expect(JSON.stringify(row!.agent_config)).not.toContain('agent-secret');

    // A factory's agent is a named agent too: its resolved config, and the run is the factory's.
    const list = (await python(t, 'GET', `/agent/identities?factory_uid=${factory.uid}`)).body.agents;
    const fixer = list.find((a: any) => a.name === 'fixer');
    const fromFactory = await python(t, 'POST', '/agent/runs', {
      agent_identity_uid: fixer.uid,
      prompt: 'Fix it',
    });
    const run2 = (await python(t, 'GET', `/agent/runs/${fromFactory.body.run_id}`)).body;
    expect(run2.agent_config).toMatchObject({
      name: 'fixer',
      model_id: 'fixer-model',
      environment_id: 'env-acme',
    });
    expect(run2.metadata).toEqual({ factory_uid: factory.uid });
  });

  it('refuses what means nothing, naming it', async () => {
    const unknownAgent = await python(t, 'POST', '/agent/runs', { prompt: 'x', agent_identity_uid: 'nope' });
    expect(unknownAgent.status).toBe(404);
    const stranger = await python(t, 'POST', '/agent/runs', { prompt: 'x', on_behalf_of: 'someone-else' });
    expect(stranger.status).toBe(400);
    expect(stranger.body.invalid_params[0].name).toBe('on_behalf_of');
    const nothing = await python(t, 'POST', '/agent/runs', {});
    expect(nothing.status).toBe(400);
    const both = await python(t, 'POST', '/agent/runs', {
      prompt: 'x',
      attachments: [{ data: b64('x'), file_name: 'a', mime_type: 'text/plain', content_type: 'text/plain' }],
    });
    expect(both.status).toBe(400);
  });

  it('starts from a skill named the ways the clients allow, the owner left out', async () => {
    for (const skill of ['factory:triage', 'factory:skills/triage/SKILL.md']) {
      const res = await python(t, 'POST', '/agent/runs', { skill });
      expect(res.status, skill).toBe(200);
      const run = (await python(t, 'GET', `/agent/runs/${res.body.run_id}`)).body;
      expect(run.agent_config).toMatchObject({ name: 'triage', skill_spec: skill });
    }
  });

  it('continues a conversation with no prompt (a handoff)', async () => {
    const first = await python(t, 'POST', '/agent/runs', { prompt: 'Start' });
    const res = await python(t, 'POST', '/agent/runs', { conversation_id: first.body.run_id });
    expect(res.status).toBe(200);
  });
});

describe('client.agent.runs.submitFollowup / cancel with the Python client’s bodies', () => {
  it('an empty JSON body is {} : a follow-up without a message continues an ended run', async () => {
    const run = await python(t, 'POST', '/agent/runs', { prompt: 'Follow me' });
    await t.service.db.execute(`UPDATE runs SET state = 'SUCCEEDED' WHERE id = $1`, [run.body.run_id]);
    const res = await python(t, 'POST', `/agent/runs/${run.body.run_id}/followups`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ followup_id: null, outcome: 'handoff_execution' });
    expect((await python(t, 'GET', `/agent/runs/${run.body.run_id}`)).body.state).toBe('QUEUED');
    const stored = await t.service.db.query(`SELECT 1 FROM run_followups WHERE run_id = $1`, [
      run.body.run_id,
    ]);
    expect(stored).toHaveLength(0);

    const withMessage = await python(t, 'POST', `/agent/runs/${run.body.run_id}/followups`, {
      message: 'And the tests',
      mode: 'plan',
    });
    expect(withMessage.status).toBe(200);
    const cancel = await python(t, 'POST', `/agent/runs/${run.body.run_id}/cancel`);
    expect(cancel.status).toBe(200);
    expect(cancel.body).toBe(run.body.run_id);
  });
});

describe('client.agent.runs.list filters', () => {
  it('filters by every parameter the clients offer', async () => {
    const root = (await python(t, 'POST', '/agent/runs', { prompt: 'Root', config: { name: 'tree' } })).body
      .run_id;
    const child = (await python(t, 'POST', '/agent/runs', { prompt: 'Child', parent_run_id: root })).body
      .run_id;
    const grandchild = (
      await python(t, 'POST', '/agent/runs', { prompt: 'Grandchild', parent_run_id: child })
    ).body.run_id;
    const ids = async (query: string) =>
      (await python(t, 'GET', `/agent/runs?${query}`)).body.runs.map((r: any) => r.run_id).sort();

    expect(await ids(`ancestor_run_id=${root}`)).toEqual([child, grandchild].sort());
    expect(await ids(`ancestor_run_id=${child}`)).toEqual([grandchild]);

    const agent = await python(t, 'POST', '/agent/identities', { name: 'executor-agent' });
    const byAgent = (
      await python(t, 'POST', '/agent/runs', { prompt: 'As agent', agent_identity_uid: agent.body.uid })
    ).body.run_id;
    expect(await ids(`executor=${agent.body.uid}`)).toEqual([byAgent]);
    expect(await ids(`executor=${me}&ancestor_run_id=${root}`)).toEqual([child, grandchild].sort());

    const dispatched = await python(t, 'POST', `/factory/${factory.uid}/runs`, { prompt: 'Dispatch' });
    expect(dispatched.status).toBe(200);
    expect(await ids(`factory_uid=${factory.uid}&source=FACTORY`)).toEqual([dispatched.body.run_id]);

    await t.service.db.execute(`UPDATE runs SET metadata = '{"automation_id": "auto-1"}' WHERE id = $1`, [
      root,
    ]);
    expect(await ids('automation_id=auto-1')).toEqual([root]);

    expect(await ids('execution_location=LOCAL')).toEqual([]);
    expect((await ids('execution_location=REMOTE')).length).toBeGreaterThan(3);
    expect(await ids('source=JIRA')).toEqual([]);
    expect((await python(t, 'GET', '/agent/runs?artifact_type=EXTERNAL_REFERENCE')).status).toBe(200);

    const bad = await python(t, 'GET', '/agent/runs?execution_location=MOON');
    expect(bad.status).toBe(400);
    expect(bad.body.invalid_params[0].name).toBe('execution_location');
  });

  it('sorts by agent (skill), runs without one last, through every page', async () => {
    for (const skill of ['b/r:z', 'b/r:a', undefined])
      await python(t, 'POST', '/agent/runs', {
        prompt: 'sorted',
        config: { name: 'sort-agent', ...(skill ? { skill_spec: skill } : {}) },
      });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await python(
        t,
        'GET',
        `/agent/runs?name=sort-agent&sort_by=agent&sort_order=asc&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(page.status).toBe(200);
      seen.push(...page.body.runs.map((r: any) => r.agent_config.skill_spec ?? '-'));
      cursor = page.body.page_info.next_cursor;
    } while (cursor);
    expect(seen).toEqual(['b/r:a', 'b/r:z', '-']);
  });
});

describe('client.agent.agent.* (named agents, /agent/identities)', () => {
  it('creates with every field, reads back the client’s AgentResponse, updates partially, deletes', async () => {
    const created = await python(t, 'POST', '/agent/identities', {
      name: 'everything',
      agent_type: 'REVIEW',
      base_harness: 'oz',
      base_model: 'm1',
      credential_strategy: 'EXECUTOR',
      default_runner_uid: 'runner-1',
      description: 'All fields',
      environment_id: 'env-1',
      factory_uid: factory.uid,
      harness: { model_id: 'h', reasoning_level: 'low', type: 'oz' },
      harness_auth_secrets: { claude_auth_secret_name: 'c', codex_auth_secret_name: 'x' },
      inference_providers: { aws: { disabled: true, region: 'r', role_arn: 'a' } },
      mcp_servers: { s: { command: 'srv', env: { KEY: 'v' } } },
      memory: {
        attached_stores: [{ access: 'read_only', instructions: 'i', uid: 'u' }],
        auto_memory: { enabled: true },
      },
      on_behalf_of_enabled: true,
      prompt: 'p',
      secrets: [{ name: 'GH_TOKEN' }],
      skills: ['acme/factory:skills/triage/SKILL.md'],
      worker_host: 'warp',
    });
    expect(created.status).toBe(201);
    const a = created.body;
    expect(a).toMatchObject({
      uid: expect.stringMatching(/^[A-Za-z0-9]{22}$/),
      name: 'everything',
      available: true,
      agent_type: 'REVIEW',
      base_model: 'm1',
      credential_strategy: 'EXECUTOR',
      default_runner_uid: 'runner-1',
      description: 'All fields',
      environment_id: 'env-1',
      factory_uid: factory.uid,
      harness: { type: 'oz' },
      mcp_servers: { s: { command: 'srv', env: { KEY: '[redacted]' } } },
      memory: { attached_stores: [{ uid: 'u' }], auto_memory: { enabled: true } },
      on_behalf_of_enabled: true,
      prompt: 'p',
      secrets: [{ name: 'GH_TOKEN' }],
      skills: ['acme/factory:skills/triage/SKILL.md'],
      worker_host: 'warp',
    });
    expect(Date.parse(a.created_at)).not.toBeNaN();

    // Omitted and null leave a field; an empty value clears it; the empty JSON body changes nothing.
    const same = await python(t, 'PUT', `/agent/identities/${a.uid}`);
    expect(same.status).toBe(200);
    expect(same.body.base_model).toBe('m1');
    const updated = await python(t, 'PUT', `/agent/identities/${a.uid}`, {
      name: 'renamed',
      base_model: '',
      description: null,
      skills: [],
      mcp_servers: {},
      memory: { attached_stores: [] },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ name: 'renamed', description: 'All fields', skills: [] });
    expect(updated.body.base_model).toBeUndefined();
    expect(updated.body.mcp_servers).toBeUndefined();
    expect(updated.body.memory.attached_stores).toEqual([]);
    expect((await python(t, 'GET', `/agent/identities/${a.uid}`)).body.name).toBe('renamed');
    // A long base prompt fits (the route takes a prompt-sized body, as follow-ups do).
    const long = await python(t, 'PUT', `/agent/identities/${a.uid}`, { prompt: 'p'.repeat(90_000) });
    expect(long.status).toBe(200);

    const names = (await python(t, 'GET', '/agent/identities')).body.agents.map((x: any) => x.name);
    expect(names).toEqual(expect.arrayContaining(['renamed', 'lead', 'fixer']));
    const lead = (await python(t, 'GET', '/agent/identities')).body.agents.find(
      (x: any) => x.name === 'lead',
    );
    expect(lead).toMatchObject({
      agent_type: 'FOREMAN',
      factory_uid: factory.uid,
      environment_id: 'env-acme',
    });
    // A factory's agent is read only here: its file is its source.
    expect((await python(t, 'PUT', `/agent/identities/${lead.uid}`, { name: 'x' })).status).toBe(409);
    expect((await python(t, 'DELETE', `/agent/identities/${lead.uid}`)).status).toBe(409);

    const del = await python(t, 'DELETE', `/agent/identities/${a.uid}`, undefined, t.adminKey, {
      accept: '*/*',
    });
    expect(del.status).toBe(204);
    expect((await python(t, 'GET', `/agent/identities/${a.uid}`)).status).toBe(404);
    expect((await python(t, 'POST', '/agent/identities', { name: 'x', factory_uid: 'nope' })).status).toBe(
      404,
    );
  });
});

describe('client.agent.list (skills) and listEnvironments', () => {
  it('lists the factory’s skills as the clients’ AgentSkill', async () => {
    const res = await python(t, 'GET', '/agent?sort_by=name&refresh=true&include_malformed_skills=true');
    expect(res.status).toBe(200);
    expect(res.body.agents).toEqual([
      {
        name: 'triage',
        variants: [
          {
            id: 'acme/factory:skills/triage/SKILL.md',
            base_prompt: expect.stringContaining('Label the issue.'),
            description: 'Labels issues',
            environments: [],
            source: { owner: 'acme', name: 'factory', skill_path: 'skills/triage/SKILL.md' },
            ...(res.body.agents[0]?.variants[0]?.last_run_timestamp
              ? { last_run_timestamp: expect.any(String) }
              : {}),
          },
        ],
      },
    ]);
    expect((await python(t, 'GET', '/agent?repo=other/repo')).body.agents).toEqual([]);
    expect((await python(t, 'GET', '/agent?sort_by=size')).status).toBe(400);
  });

  it('lists the environments the team’s runs, factory and agents name', async () => {
    const run = await python(t, 'POST', '/agent/runs', {
      prompt: 'In an env',
      config: { environment_id: 'env-run' },
    });
    const res = await python(t, 'GET', '/agent/environments?sort_by=name');
    expect(res.status).toBe(200);
    const byUid = new Map(res.body.environments.map((e: any) => [e.uid, e]));
    expect(byUid.get('env-acme')).toMatchObject({ config: { name: 'env-acme' }, setup_failed: false });
    expect(byUid.get('env-run')).toMatchObject({
      config: { name: 'env-run' },
      setup_failed: false,
      last_updated: expect.any(String),
      last_task_created: { id: run.body.run_id, state: 'QUEUED', title: 'In an env' },
      scope: { type: 'Team', uid: t.defaultTeam.uid },
    });
    const uids = res.body.environments.map((e: any) => e.uid);
    expect(uids).toEqual([...uids].sort());
  });
});

describe('client.agent.sessions / conversations checkRedirect', () => {
  it('answers within the team, sends a browser to the dashboard, and without a key answers the holder of an ended run’s session', async () => {
    const run = (await python(t, 'POST', '/agent/runs', { prompt: 'Session' })).body.run_id;
    const session = '0b7c6a52-5d0e-4a61-9f7e-3f1b2c4d5e6f';
    await t.service.db.execute(`UPDATE runs SET session_id = $2, state = 'INPROGRESS' WHERE id = $1`, [
      run,
      session,
    ]);
    expect((await python(t, 'GET', `/agent/conversations/${run}/redirect`)).body).toEqual({
      session_id: session,
    });
    expect((await python(t, 'GET', `/agent/sessions/${session}/redirect`)).body).toEqual({});
    // The newest clients' sessions.checkRedirect sends no key: a live run's session does not redirect.
    const live = await typescript(t, 'GET', `/agent/sessions/${session}/redirect`, undefined, null);
    expect(live).toMatchObject({ status: 200, body: {} });
    await t.service.db.execute(`UPDATE runs SET state = 'SUCCEEDED' WHERE id = $1`, [run]);
    expect((await python(t, 'GET', `/agent/sessions/${session}/redirect`)).body).toEqual({
      conversation_id: run,
    });
    expect((await python(t, 'GET', `/agent/conversations/${run}/redirect`)).body).toEqual({});

    const browser = await python(t, 'GET', `/agent/sessions/${session}/redirect`, undefined, t.adminKey, {
      accept: 'text/html,application/xhtml+xml',
    });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe(`/ui/runs/${run}`);
    // Without a key the session id is the credential: once its run has ended, it names the conversation.
    const ended = await typescript(t, 'GET', `/agent/sessions/${session}/redirect`, undefined, null);
    expect(ended).toMatchObject({ status: 200, body: { conversation_id: run } });
    // An unknown session tells a caller without a key no more than a live one; the conversation
    // redirect gives nothing without a key.
    const unknown = '0b7c6a52-0000-4a61-9f7e-3f1b2c4d5e6f';
    expect((await typescript(t, 'GET', `/agent/sessions/${unknown}/redirect`, undefined, null)).body).toEqual(
      {},
    );
    expect((await typescript(t, 'GET', `/agent/sessions/not-a-uuid/redirect`, undefined, null)).body).toEqual(
      {},
    );
    await t.service.db.execute(`UPDATE runs SET state = 'INPROGRESS' WHERE id = $1`, [run]);
    expect(
      (await typescript(t, 'GET', `/agent/conversations/${run}/redirect`, undefined, null)).body,
    ).toEqual({});
    expect(
      (await python(t, 'GET', '/agent/sessions/0b7c6a52-0000-4a61-9f7e-3f1b2c4d5e6f/redirect')).status,
    ).toBe(404);
  });
});

describe('another team (attacker) reaches nothing of this team’s', () => {
  it('gets 404 for every named agent, run, session and conversation, and sees no environment or skill', async () => {
    const mine = await python(t, 'POST', '/agent/identities', {
      name: 'private',
      environment_id: 'env-secret',
    });
    const run = (
      await python(t, 'POST', '/agent/runs', { prompt: 'Mine', config: { environment_id: 'env-secret' } })
    ).body.run_id;
    const session = '1b7c6a52-5d0e-4a61-9f7e-3f1b2c4d5e6f';
    await t.service.db.execute(`UPDATE runs SET session_id = $2 WHERE id = $1`, [run, session]);
    const lead = (await python(t, 'GET', '/agent/identities')).body.agents.find(
      (x: any) => x.name === 'lead',
    );
    const { key } = await t.newTeam('attackers', ['runs:read', 'runs:write', 'factory:manage']);

    for (const uid of [mine.body.uid, lead.uid]) {
      expect((await python(t, 'GET', `/agent/identities/${uid}`, undefined, key)).status).toBe(404);
      expect(
        (await python(t, 'POST', '/agent/runs', { prompt: 'x', agent_identity_uid: uid }, key)).status,
      ).toBe(404);
    }
    expect(
      (await python(t, 'PUT', `/agent/identities/${mine.body.uid}`, { name: 'pwned' }, key)).status,
    ).toBe(404);
    expect((await python(t, 'DELETE', `/agent/identities/${mine.body.uid}`, undefined, key)).status).toBe(
      404,
    );
    expect((await python(t, 'GET', `/agent/identities/${mine.body.uid}`)).body.name).toBe('private');
    expect((await python(t, 'GET', '/agent/identities', undefined, key)).body.agents).toEqual([]);
    expect((await python(t, 'GET', `/agent/runs/${run}/handoff/attachments`, undefined, key)).status).toBe(
      404,
    );
    expect((await python(t, 'GET', `/agent/sessions/${session}/redirect`, undefined, key)).status).toBe(404);
    expect((await python(t, 'GET', `/agent/conversations/${run}/redirect`, undefined, key)).status).toBe(404);
    expect((await python(t, 'GET', '/agent/environments', undefined, key)).body.environments).toEqual([]);
    expect((await python(t, 'GET', '/agent', undefined, key)).body.agents).toEqual([]);
    expect((await python(t, 'GET', `/agent/runs?executor=${me}`, undefined, key)).body.runs).toEqual([]);
    expect((await python(t, 'GET', `/agent/runs?ancestor_run_id=${run}`, undefined, key)).body.runs).toEqual(
      [],
    );
  });
});
