import OzAPI, {
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
} from 'oz-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './support/service.js';
import { acmeFactory } from './oz-wire/support.js';

/** The official TypeScript client, unchanged, pointed at factoryd: the judge of wire compatibility. */
let t: TestService;
let client: OzAPI;
beforeAll(async () => {
  t = await startTestService();
  client = new OzAPI({ apiKey: t.adminKey, baseURL: t.api, maxRetries: 0 });
});
afterAll(async () => t?.stop());

describe('oz-agent-sdk against factoryd', () => {
  it('runs, retrieves, lists with filters and cancels', async () => {
    const created = await client.agent.run({
      prompt: 'Upgrade the lint config',
      title: 'Lint upgrade',
      config: { name: 'sdk-agent', model_id: 'claude-x', environment_id: 'env-sdk' },
    });
    expect(created.state).toBe('QUEUED');
    expect(created.run_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.task_id).toBe(created.run_id);

    const other = await client.agent.run({ prompt: 'Another', config: { name: 'other-agent' } });
    const third = await client.agent.run({ prompt: 'Third', config: { name: 'sdk-agent' } });
    await t.service.db.execute(`UPDATE runs SET state = 'SUCCEEDED' WHERE id = $1`, [third.run_id]);

    const item = await client.agent.runs.retrieve(created.run_id);
    expect(item).toMatchObject({
      run_id: created.run_id,
      task_id: created.run_id,
      title: 'Lint upgrade',
      prompt: 'Upgrade the lint config',
      state: 'QUEUED',
      source: 'API',
      agent_config: { name: 'sdk-agent', model_id: 'claude-x', environment_id: 'env-sdk' },
    });
    expect(Number.isNaN(Date.parse(item.created_at))).toBe(false);

    const byName = await client.agent.runs.list({ name: 'sdk-agent' });
    expect(byName.runs.map((r) => r.run_id).sort()).toEqual([created.run_id, third.run_id].sort());
    const byStates = await client.agent.runs.list({ state: ['QUEUED', 'SUCCEEDED'], name: 'sdk-agent' });
    expect(byStates.runs).toHaveLength(2);
    const queued = await client.agent.runs.list({ state: ['QUEUED'], limit: 1, model_id: 'claude-x' });
    expect(queued.runs.map((r) => r.run_id)).toEqual([created.run_id]);
    expect(queued.page_info.has_next_page).toBe(false);

    // Newest update first (the default order), two at a time through next_cursor.
    const page1 = await client.agent.runs.list({ limit: 2 });
    expect(page1.page_info.has_next_page).toBe(true);
    const page2 = await client.agent.runs.list({ limit: 2, cursor: page1.page_info.next_cursor });
    expect(page2.page_info.has_next_page).toBe(false);
    expect([...page1.runs, ...page2.runs].map((r) => r.run_id)).toEqual([
      third.run_id,
      other.run_id,
      created.run_id,
    ]);

    const cancelled = await client.agent.runs.cancel(other.run_id);
    expect(cancelled).toBe(other.run_id);
    expect((await client.agent.runs.retrieve(other.run_id)).state).toBe('CANCELLED');
  });

  it('raises its error classes for 400, 401, 403, 404 and 409', async () => {
    const bad = new OzAPI({ apiKey: 'fd_wrong_key_000000000000000000', baseURL: t.api, maxRetries: 0 });
    await expect(bad.agent.runs.list()).rejects.toBeInstanceOf(AuthenticationError);
    const err = (await bad.agent.runs.list().catch((e: unknown) => e)) as AuthenticationError;
    expect(err.status).toBe(401);
    expect(err.error).toMatchObject({ error: 'authentication_required' });

    await expect(client.agent.runs.retrieve('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(client.agent.runs.cancel('00000000-0000-4000-8000-000000000000')).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(client.agent.run({ title: 'no prompt' })).rejects.toBeInstanceOf(BadRequestError);
    await expect(client.agent.runs.list({ limit: 1000 })).rejects.toBeInstanceOf(BadRequestError);

    const reader = new OzAPI({
      apiKey: await t.newKey([t.defaultTeam], ['runs:read']),
      baseURL: t.api,
      maxRetries: 0,
    });
    await expect(reader.agent.run({ prompt: 'x' })).rejects.toBeInstanceOf(PermissionDeniedError);

    const run = await client.agent.run({ prompt: 'soon pending' });
    await t.service.db.execute(`UPDATE runs SET state = 'PENDING' WHERE id = $1`, [run.run_id]);
    await expect(client.agent.runs.cancel(run.run_id)).rejects.toBeInstanceOf(ConflictError);
    await t.service.db.execute(`UPDATE runs SET state = 'FAILED' WHERE id = $1`, [run.run_id]);
    await expect(client.agent.runs.cancel(run.run_id)).rejects.toBeInstanceOf(BadRequestError);
  });
});

describe('oz-agent-sdk: client.agent.list (the team’s skills)', () => {
  it('lists the skills a factory of the team manages, and a run started from one shows where it ran', async () => {
    await acmeFactory(t);
    const { agents } = await client.agent.list({ sort_by: 'name', refresh: true });
    expect(agents).toEqual([
      expect.objectContaining({
        name: 'triage',
        variants: [
          expect.objectContaining({
            id: 'acme/factory:skills/triage/SKILL.md',
            description: 'Labels issues',
            source: { owner: 'acme', name: 'factory', skill_path: 'skills/triage/SKILL.md' },
          }),
        ],
      }),
    ]);
    const run = await client.agent.run({ skill: agents[0]!.variants[0]!.id });
    const item = await client.agent.runs.retrieve(run.run_id);
    expect(item).toMatchObject({ agent_config: { name: 'triage' }, execution_location: 'REMOTE' });
    const [last] = (await client.agent.list({ sort_by: 'last_run' })).agents;
    expect(last!.variants[0]!.last_run_timestamp).toBe(item.created_at);
  });
});
