import OzAPI, { NotFoundError } from 'oz-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../src/common/clock.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { ScheduleFiring } from '../src/schedules/schedule-firing.js';
import { eventually } from './support/eventually.js';
import { baseFactory, TestRepo } from './support/git-repo.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * /agent/schedules as the Oz clients call it, and firing: at the right minute by the service's Clock,
 * exactly once across replicas, no burst after an outage, nothing while paused. Times are in 2030 so
 * that a replica's real clock (before a test sets it) never finds anything due.
 */
let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

const setClock = (on: TestService, iso: string) => {
  on.service.app.get(Clock).now = () => new Date(iso);
};
const fire = (on: TestService, iso: string, batch?: number) =>
  on.service.app.get(ScheduleFiring).fireDue(new Date(iso), batch);

/** The runs a schedule started, through the run API's own `schedule_id` filter. */
async function runsOf(scheduleId: string, key?: string): Promise<any[]> {
  const res = await t.call('GET', `/api/v1/agent/runs?schedule_id=${scheduleId}&limit=500`, undefined, key);
  expect(res.status).toBe(200);
  return res.body.runs;
}

const create = (body: Record<string, unknown>, key?: string) =>
  t.call('POST', '/api/v1/agent/schedules', body, key);

describe('the schedules API', () => {
  it('creates, gets, lists by name, updates, pauses, resumes and deletes, shaped like ScheduledAgentItem', async () => {
    setClock(t, '2030-01-01T08:00:00Z');
    const created = await create({
      name: 'Daily review',
      cron_schedule: '0 9 * * *',
      prompt: 'Review open pull requests',
      agent_config: {
        model_id: 'claude-x',
        mcp_servers: { gh: { url: 'https://mcp', headers: { A: 'tok' } } },
      },
      metadata: { team: 'infra' },
      mode: 'plan',
      team: true,
    });
    expect(created.status).toBe(200);
    const s = created.body;
    expect(s).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'Daily review',
      cron_schedule: '0 9 * * *',
      enabled: true,
      prompt: 'Review open pull requests',
      agent_config: {
        model_id: 'claude-x',
        mcp_servers: { gh: { url: 'https://mcp', headers: { A: '[redacted]' } } },
      },
      metadata: { team: 'infra' },
      mode: 'plan',
      scope: { type: 'Team', uid: t.defaultTeam.uid },
      history: { last_ran: null, last_run_id: null, next_run: '2030-01-01T09:00:00.000Z' },
      last_spawn_error: null,
      created_by: { type: expect.any(String), uid: expect.any(String), display_name: expect.any(String) },
    });
    expect(Date.parse(s.created_at)).not.toBeNaN();

    const b = await create({ name: 'A first by name', cron_schedule: '@hourly', prompt: 'x' });
    const list = await t.call('GET', '/api/v1/agent/schedules');
    expect(list.status).toBe(200);
    const names = list.body.schedules.map((x: any) => x.name);
    expect(names.indexOf('A first by name')).toBeLessThan(names.indexOf('Daily review'));

    expect((await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).body).toEqual(s);

    // PUT: cron, enabled and name required; what is left out is kept.
    setClock(t, '2030-01-01T08:30:00Z');
    const updated = await t.call('PUT', `/api/v1/agent/schedules/${s.id}`, {
      name: 'Hourly review',
      cron_schedule: '@every 15m',
      enabled: true,
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      name: 'Hourly review',
      cron_schedule: '@every 15m',
      prompt: 'Review open pull requests',
      metadata: { team: 'infra' },
      mode: 'plan',
      agent_config: { model_id: 'claude-x' },
      history: { next_run: '2030-01-01T08:45:00.000Z' },
    });

    const paused = await t.call('POST', `/api/v1/agent/schedules/${s.id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ enabled: false, history: { next_run: null } });
    setClock(t, '2030-01-01T10:07:00Z');
    const resumed = await t.call('POST', `/api/v1/agent/schedules/${s.id}/resume`);
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ enabled: true, history: { next_run: '2030-01-01T10:15:00.000Z' } });

    const deleted = await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
    expect(deleted).toMatchObject({ status: 200, body: { success: true } });
    expect((await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).status).toBe(404);
    await t.call('DELETE', `/api/v1/agent/schedules/${b.body.id}`);
  });

  it('answers a bad cron with 400 and the reason, naming cron_schedule', async () => {
    for (const [cron, reason] of [
      ['61 9 * * *', 'Invalid value for minute: 61'],
      ['0 9 * *', 'has 4 fields; a cron expression has exactly 5'],
      ['0 0 31 2 *', 'never fires'],
      ['@every 10s', 'not a valid @every'],
    ]) {
      const res = await create({ name: 'bad', cron_schedule: cron, prompt: 'x' });
      expect(res.status, cron).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({
        error: 'invalid_request',
        invalid_params: [{ name: 'cron_schedule' }],
      });
      expect(res.body.detail).toContain(reason);
    }
    const ok = await create({ name: 'ok', cron_schedule: '@daily', prompt: 'x' });
    const put = await t.call('PUT', `/api/v1/agent/schedules/${ok.body.id}`, {
      name: 'ok',
      cron_schedule: '* * * * * *',
      enabled: true,
    });
    expect(put.status).toBe(400);
    expect(put.body.detail).toContain('has 6 fields');
    // The rest of a bad body is named too.
    const noPrompt = await create({ name: 'p', cron_schedule: '@daily' });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.body.detail).toMatch(/prompt is required unless agent_config.skill_spec/);
    const reserved = await create({
      name: 'p',
      cron_schedule: '@daily',
      prompt: 'x',
      metadata: { schedule_id: 'x' },
    });
    expect(reserved.status).toBe(400);
    expect((await t.call('PUT', `/api/v1/agent/schedules/${ok.body.id}`, { name: 'ok' })).status).toBe(400);
    const nul = await create({ name: 'a\u0000b', cron_schedule: '@daily', prompt: 'x' });
    expect(nul.status).toBe(400);
    expect(nul.body.invalid_params).toEqual([{ name: 'name', reason: expect.stringMatching(/NUL/) }]);
  });

  it('keeps each team to its own schedules: another team gets 404 on every method, and an empty list', async () => {
    const mine = (await create({ name: 'secret plan', cron_schedule: '@daily', prompt: 'x' })).body;
    const { key } = await t.newTeam(`attacker-${Date.now()}`);
    const path = `/api/v1/agent/schedules/${mine.id}`;
    const attempts = [
      await t.call('GET', path, undefined, key),
      await t.call('PUT', path, { name: 'mine now', cron_schedule: '* * * * *', enabled: true }, key),
      await t.call('POST', `${path}/pause`, undefined, key),
      await t.call('POST', `${path}/resume`, undefined, key),
      await t.call('DELETE', path, undefined, key),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: 'resource_not_found' });
    }
    expect((await t.call('GET', '/api/v1/agent/schedules', undefined, key)).body).toEqual({ schedules: [] });
    // Unchanged, and a key without runs:write cannot change even its own team's.
    expect((await t.call('GET', path)).body).toMatchObject({ name: 'secret plan', enabled: true });
    const reader = await t.newKey([t.defaultTeam], ['runs:read']);
    expect((await t.call('POST', `${path}/pause`, undefined, reader)).status).toBe(403);
    expect((await t.call('GET', path, undefined, reader)).status).toBe(200);
  });
});

describe('firing', () => {
  it('starts one run at the minute its cron names, with source SCHEDULED_AGENT, and records it', async () => {
    setClock(t, '2030-02-01T08:59:00Z');
    const s = (
      await create({
        name: 'Nine o’clock',
        cron_schedule: '0 9 * * *',
        prompt: 'Morning report',
        agent_config: {
          name: 'reporter',
          mcp_servers: { gh: { url: 'https://mcp', headers: { A: 'tok' } } },
        },
        metadata: { kind: 'report' },
      })
    ).body;
    await fire(t, '2030-02-01T08:59:59.999Z');
    expect(await runsOf(s.id)).toEqual([]);

    setClock(t, '2030-02-01T09:00:00Z');
    const [run] = await eventually(async () => {
      const runs = await runsOf(s.id);
      return runs.length ? runs : undefined;
    }, 'the 09:00 run');
    expect(run).toMatchObject({
      title: 'Nine o’clock',
      prompt: 'Morning report',
      state: 'QUEUED',
      source: 'SCHEDULED_AGENT',
      metadata: { kind: 'report', schedule_id: s.id },
      agent_config: { name: 'reporter', mcp_servers: { gh: { headers: { A: '[redacted]' } } } },
      creator: s.created_by,
    });
    // The credential reaches the run sealed for it, and opens for the harness.
    const [stored] = await t.service.db.query(`SELECT agent_config FROM runs WHERE id = $1`, [run.run_id]);
    expect(JSON.stringify(stored!.agent_config)).not.toContain('tok');
    const after = (await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).body;
    expect(after.history).toEqual({
      last_ran: '2030-02-01T09:00:00.000Z',
      last_run_id: run.run_id,
      next_run: '2030-02-02T09:00:00.000Z',
    });
    await fire(t, '2030-02-01T09:00:30Z');
    expect(await runsOf(s.id)).toHaveLength(1);
    // A run whose caller wrote the schedule's id into its metadata is not one the schedule started.
    const lookalike = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Me too',
      metadata: { schedule_id: s.id },
    });
    expect(lookalike.status).toBe(200);
    expect((await runsOf(s.id)).map((r) => r.run_id)).toEqual([run.run_id]);
    await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
  });

  it('runs as its agent_uid: the agent’s defaults under its config, the agent as executor; an unknown agent is 404', async () => {
    setClock(t, '2030-02-03T08:00:00Z');
    const agent = await t.call('POST', '/api/v1/agent/identities', {
      name: 'nightly',
      base_model: 'agent-model',
    });
    expect(agent.status).toBe(201);
    const unknown = await create({
      name: 'Nobody',
      cron_schedule: '0 9 * * *',
      prompt: 'x',
      agent_uid: 'no-such-agent',
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toContain('agent no-such-agent does not exist in this team');
    const s = (
      await create({
        name: 'As an agent',
        cron_schedule: '0 9 * * *',
        prompt: 'Nightly sweep',
        agent_uid: agent.body.uid,
        agent_config: { environment_id: 'env-nightly' },
      })
    ).body;
    expect(s).toMatchObject({ agent_uid: agent.body.uid, environment: { name: 'env-nightly' } });
    const moved = await t.call('PUT', `/api/v1/agent/schedules/${s.id}`, {
      name: 'As an agent',
      cron_schedule: '0 9 * * *',
      enabled: true,
      agent_uid: 'no-such-agent',
    });
    expect(moved.status).toBe(404);

    await fire(t, '2030-02-03T09:00:00Z');
    const [run] = await runsOf(s.id);
    expect(run).toMatchObject({
      agent_config: { model_id: 'agent-model', environment_id: 'env-nightly' },
      executor: { type: 'service_account', uid: agent.body.uid, display_name: 'nightly' },
    });

    // The agent deleted since: that firing fails alone, with the reason on the schedule.
    expect((await t.call('DELETE', `/api/v1/agent/identities/${agent.body.uid}`)).status).toBeLessThan(300);
    await fire(t, '2030-02-04T09:00:00Z');
    expect(await runsOf(s.id)).toHaveLength(1);
    const after = (await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).body;
    expect(after.last_spawn_error).toContain(`agent ${agent.body.uid} does not exist in this team any more`);
    await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
  });

  it('fires each firing exactly once when two replicas on one database race for it', async () => {
    const replica = await startTestService({}, { sameDatabaseAs: t });
    try {
      setClock(t, '2030-03-01T08:00:00Z');
      setClock(replica, '2030-03-01T08:00:00Z');
      const ids: string[] = [];
      for (let i = 0; i < 40; i++)
        ids.push(
          (await create({ name: `race ${i}`, cron_schedule: '0 9 * * *', prompt: `race ${i}` })).body.id,
        );
      // Both background schedulers and four explicit passes in small batches, all at once.
      const due = '2030-03-01T09:00:05Z';
      setClock(t, due);
      setClock(replica, due);
      await Promise.all([fire(t, due, 3), fire(replica, due, 3), fire(t, due, 7), fire(replica, due, 5)]);
      await eventually(async () => {
        const [row] = await t.service.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM schedules WHERE id = ANY($1::uuid[]) AND next_fire_at = '2030-03-02T09:00:00Z'`,
          [ids],
        );
        return row!.n === ids.length;
      }, 'every schedule moved on to the next day');
      const counts = await t.service.db.query<{ schedule_id: string; n: number }>(
        `SELECT metadata->>'schedule_id' AS schedule_id, count(*)::int AS n FROM runs
          WHERE metadata->>'schedule_id' = ANY($1::text[]) GROUP BY 1`,
        [ids],
      );
      expect(counts).toHaveLength(ids.length);
      expect(counts.filter((c) => c.n !== 1)).toEqual([]);
    } finally {
      await replica.stop();
    }
  });

  it('fires nothing while paused, and does not make up for the paused times on resume', async () => {
    setClock(t, '2030-04-01T08:00:00Z');
    const s = (await create({ name: 'pausable', cron_schedule: '*/15 * * * *', prompt: 'p' })).body;
    await t.call('POST', `/api/v1/agent/schedules/${s.id}/pause`);
    await fire(t, '2030-04-01T09:00:00Z');
    expect(await runsOf(s.id)).toEqual([]);

    setClock(t, '2030-04-01T09:05:00Z');
    const resumed = (await t.call('POST', `/api/v1/agent/schedules/${s.id}/resume`)).body;
    expect(resumed.history.next_run).toBe('2030-04-01T09:15:00.000Z');
    await fire(t, '2030-04-01T09:10:00Z');
    expect(await runsOf(s.id)).toEqual([]);
    setClock(t, '2030-04-01T09:15:00Z');
    await eventually(async () => (await runsOf(s.id)).length === 1, 'the 09:15 run');
    await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
  });

  it('keeps the claim and the run together: a run the database refuses moves its schedule on with the reason, and doubles no other', async () => {
    setClock(t, '2030-04-15T08:00:00Z');
    const poison = (await create({ name: 'poison', cron_schedule: '0 9 * * *', prompt: 'p' })).body;
    const fine = (await create({ name: 'fine', cron_schedule: '0 9 * * *', prompt: 'f' })).body;
    // A real refusal by PostgreSQL: the batch's one statement fails whole, and nothing of it stays.
    await t.service.db.execute(`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.title = 'poison' THEN RAISE EXCEPTION 'poisoned run refused'; END IF; RETURN NEW; END $$`);
    await t.service.db.execute(
      `CREATE TRIGGER refuse_poison BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse_poison()`,
    );
    try {
      await fire(t, '2030-04-15T09:00:00Z');
      expect(await runsOf(fine.id)).toHaveLength(1);
      expect(await runsOf(poison.id)).toEqual([]);
      const after = (await t.call('GET', `/api/v1/agent/schedules/${poison.id}`)).body;
      expect(after.last_spawn_error).toMatch(/poisoned run refused/);
      expect(after.history).toMatchObject({ last_ran: null, next_run: '2030-04-16T09:00:00.000Z' });
    } finally {
      await t.service.db.execute(`DROP TRIGGER refuse_poison ON runs; DROP FUNCTION refuse_poison()`);
    }
    // The next firing that can start its run clears the error.
    await fire(t, '2030-04-16T09:00:00Z');
    expect((await t.call('GET', `/api/v1/agent/schedules/${poison.id}`)).body.last_spawn_error).toBeNull();
    expect(await runsOf(poison.id)).toHaveLength(1);
    expect(await runsOf(fine.id)).toHaveLength(2);
    for (const s of [poison, fine]) await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
  });

  it('after an outage fires a missed schedule once, not once per missed time, then keeps to its cron', async () => {
    setClock(t, '2030-05-01T09:00:00Z');
    const s = (await create({ name: 'every quarter hour', cron_schedule: '@every 15m', prompt: 'q' })).body;
    expect(s.history.next_run).toBe('2030-05-01T09:15:00.000Z');
    // Down from before 09:15 until 12:07: twelve quarter hours missed.
    await t.restart();
    setClock(t, '2030-05-01T12:07:00Z');
    await eventually(async () => (await runsOf(s.id)).length === 1, 'one catch-up run');
    await fire(t, '2030-05-01T12:07:30Z');
    expect(await runsOf(s.id)).toHaveLength(1);
    expect((await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).body.history).toMatchObject({
      last_ran: '2030-05-01T12:07:00.000Z',
      next_run: '2030-05-01T12:15:00.000Z',
    });
    await fire(t, '2030-05-01T12:15:00Z');
    expect(await runsOf(s.id)).toHaveLength(2);
    await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`);
  });
});

describe('a factory’s provider: schedule trigger', () => {
  it('becomes a schedule the factory owns: shown by the API, changed only by the file, fired with the automation’s config', async () => {
    setClock(t, '2030-06-01T08:00:00Z');
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'v');
    const repo = new TestRepo();
    try {
      const nightly = (cron: string, extra = '') =>
        `---\n${extra}triggers:\n  - provider: schedule\n    event: cron_fired\n    filter:\n      cron_schedule: "${cron}"\n---\nSummarise the night.\n`;
      const path = 'automations/nightly/automation.md';
      repo.commit({ ...baseFactory(), [path]: nightly('30 8 * * *') });
      const factory = (await t.service.app.get(DefinitionStore).register({
        teamId: t.defaultTeam.id,
        name: `owned-${Date.now()}`,
        repoUrl: repo.dir,
        branch: 'main',
      }))!;
      const reconciler = t.service.app.get(Reconciler);
      const apply = async (files: Record<string, string | null>) => {
        repo.commit(files);
        expect((await reconciler.request(factory.id)).errors).toEqual([]);
      };
      expect((await reconciler.request(factory.id)).errors).toEqual([]);
      const s = await eventually(async () => {
        const list = (await t.call('GET', '/api/v1/agent/schedules')).body.schedules;
        return list.find((x: any) => x.factory?.uid === factory.uid);
      }, 'the factory’s schedule');
      expect(s).toMatchObject({
        name: 'nightly',
        cron_schedule: '30 8 * * *',
        prompt: 'Summarise the night.',
        enabled: true,
        agent_config: { name: 'lead', model_id: 'lead-model', base_prompt: 'You lead the factory.' },
        factory: { uid: factory.uid, automation: path, trigger_index: 0 },
        history: { next_run: '2030-06-01T08:30:00.000Z' },
      });

      const refused = await t.call('POST', `/api/v1/agent/schedules/${s.id}/pause`);
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toContain(path);
      expect((await t.call('DELETE', `/api/v1/agent/schedules/${s.id}`)).status).toBe(409);

      setClock(t, '2030-06-01T08:30:00Z');
      const [run] = await eventually(async () => {
        const runs = await runsOf(s.id);
        return runs.length ? runs : undefined;
      }, 'the factory schedule’s run');
      expect(run).toMatchObject({
        source: 'SCHEDULED_AGENT',
        prompt: 'Summarise the night.',
        metadata: { schedule_id: s.id, automation: 'nightly' },
        agent_config: { name: 'lead', model_id: 'lead-model' },
      });

      // The file changes: a new cron counts from now; the file disabling it pauses it; removing it deletes it.
      const get = async () => (await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).body;
      await apply({ [path]: nightly('0 * * * *') });
      await eventually(
        async () => (await get()).history.next_run === '2030-06-01T09:00:00.000Z',
        'the new cron',
      );
      await apply({ [path]: nightly('0 * * * *', 'enabled: false\n') });
      await eventually(async () => (await get()).enabled === false, 'paused by the file');
      await apply({ [path]: null });
      await eventually(
        async () => (await t.call('GET', `/api/v1/agent/schedules/${s.id}`)).status === 404,
        'gone with its trigger',
      );
    } finally {
      repo.remove();
    }
  });

  it('applies from git like any file; a bad cron fails the apply at file:line and the last good schedule stays', async () => {
    setClock(t, '2030-06-02T08:00:00Z');
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'v');
    const repo = new TestRepo();
    try {
      const nightly = (cron: string) =>
        `---\nagent: fixer\ntriggers:\n  - provider: schedule\n    event: cron_fired\n    filter:\n      cron_schedule: "${cron}"\n---\nFix the flaky tests.\n`;
      repo.commit({ ...baseFactory(), 'automations/nightly/automation.md': nightly('@every 1h') });
      const factory = (await t.service.app.get(DefinitionStore).register({
        teamId: t.defaultTeam.id,
        name: `git-schedules-${Date.now()}`,
        repoUrl: repo.dir,
        branch: 'main',
      }))!;
      const reconciler = t.service.app.get(Reconciler);
      expect((await reconciler.request(factory.id)).errors).toEqual([]);
      const mine = async () =>
        (await t.call('GET', '/api/v1/agent/schedules')).body.schedules.filter(
          (x: any) => x.factory?.uid === factory.uid,
        );
      const [s] = await eventually(async () => ((await mine()).length === 1 ? mine() : undefined), 'applied');
      expect(s).toMatchObject({
        cron_schedule: '@every 1h',
        prompt: 'Fix the flaky tests.',
        agent_config: { name: 'fixer', model_id: 'base-model' },
        history: { next_run: '2030-06-02T09:00:00.000Z' },
      });

      repo.commit({ 'automations/nightly/automation.md': nightly('0 25 * * *') });
      const failed = await reconciler.request(factory.id);
      expect(failed.errors).toEqual([
        {
          path: 'automations/nightly/automation.md',
          line: 7,
          message: 'cron_schedule: "0 25 * * *" is not a valid cron expression: Invalid value for hour: 25',
        },
      ]);
      const applies = (await t.call('GET', `/api/v1/factory/${factory.uid}/applies`)).body.applies;
      // (Both applies started at the same instant of the test's clock: found by result, not by order.)
      expect(applies.find((a: any) => a.result === 'failed')).toMatchObject({ errors: failed.errors });
      expect((await mine()).map((x: any) => x.cron_schedule)).toEqual(['@every 1h']);
    } finally {
      repo.remove();
    }
  });
});

describe('oz-agent-sdk', () => {
  it('drives client.agent.schedules unchanged: create, retrieve, list, update, pause, resume, delete', async () => {
    setClock(t, '2030-07-01T08:00:00Z');
    const client = new OzAPI({ apiKey: t.adminKey, baseURL: t.api, maxRetries: 0 });
    const created = await client.agent.schedules.create({
      name: 'SDK schedule',
      cron_schedule: '0 9 * * 1-5',
      prompt: 'From the SDK',
      enabled: true,
    });
    expect(created).toMatchObject({
      name: 'SDK schedule',
      enabled: true,
      history: { next_run: '2030-07-01T09:00:00.000Z' },
    });
    expect((await client.agent.schedules.retrieve(created.id)).prompt).toBe('From the SDK');
    expect((await client.agent.schedules.list()).schedules.map((x) => x.id)).toContain(created.id);
    const updated = await client.agent.schedules.update(created.id, {
      name: 'SDK schedule',
      cron_schedule: '@daily',
      enabled: true,
      prompt: 'From the SDK, daily',
    });
    expect(updated.cron_schedule).toBe('@daily');
    expect((await client.agent.schedules.pause(created.id)).enabled).toBe(false);
    expect((await client.agent.schedules.resume(created.id)).enabled).toBe(true);
    expect(await client.agent.schedules.delete(created.id)).toEqual({ success: true });
    await expect(client.agent.schedules.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
    const bad = await client.agent.schedules
      .create({ name: 'x', cron_schedule: 'every day', prompt: 'x' })
      .catch((e: unknown) => e);
    expect((bad as { status: number }).status).toBe(400);
  });
});
