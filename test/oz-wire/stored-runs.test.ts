import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueryRunner } from 'typeorm';
import { RunErrorCodes1763690410000 } from '../../src/database/migrations/1763690410000-run-error-codes.js';
import { RunItemFields1763690400000 } from '../../src/database/migrations/1763690400000-run-item-fields.js';
import { ArtifactsOneHome1763690450000 } from '../../src/database/migrations/1763690450000-artifacts-one-home.js';
import { RunItemCorrections1763690460000 } from '../../src/database/migrations/1763690460000-run-item-corrections.js';
import { startTestService, type TestService } from '../support/service.js';
import { artifactText } from '../support/artifacts.js';
import { python } from './support.js';

// Runs stored before the newest clients' fields existed read back as those clients expect, once the
// migrations ran: the factory, root and schedule they kept elsewhere, and the clients' error codes.
let t: TestService;
let runner: QueryRunner;
beforeAll(async () => {
  t = await startTestService();
  runner = t.service.db.dataSource.createQueryRunner();
});
afterAll(async () => {
  await runner?.release();
  await t?.stop();
});

const created = async (body: Record<string, unknown>, key?: string) =>
  (
    await python(
      t,
      'POST',
      '/agent/runs',
      { ...body, config: { ...(body.config as object), worker_host: 'parked' } },
      key,
    )
  ).body.run_id;
const item = async (id: string, key?: string) =>
  (await python(t, 'GET', `/agent/runs/${id}`, undefined, key)).body;

describe('runs stored before RunItemFields and RunItemCorrections', () => {
  it('take their factory from the metadata stamp, their root from the parent chain, the schedule that fired them by id in the team', async () => {
    const schedule = (
      await python(t, 'POST', '/agent/schedules', {
        name: 'Old schedule',
        cron_schedule: '0 1 * * *',
        prompt: 'x',
      })
    ).body;
    const { key: otherKey } = await t.newTeam('other-team');
    const stamped = await created({ prompt: 'Stamped', metadata: { factory_uid: 'OldFactory000000000000' } });
    const root = await created({ prompt: 'Root' });
    const child = await created({ prompt: 'Child', parent_run_id: root });
    const grandchild = await created({ prompt: 'Grandchild', parent_run_id: child });
    // A run the schedule fired, as the scheduler stores it: SCHEDULED_AGENT, its metadata naming it.
    const scheduled = await created({ prompt: 'Fired', metadata: { schedule_id: schedule.id } });
    await t.service.db.execute(`UPDATE runs SET source = 'SCHEDULED_AGENT' WHERE id = $1`, [scheduled]);
    // An API run whose caller put the schedule's id in its metadata: no schedule fired it.
    const named = await created({ prompt: 'Named', metadata: { schedule_id: schedule.id } });
    // Another team's run naming this team's schedule learns nothing of it.
    const foreign = await created({ prompt: 'Foreign', metadata: { schedule_id: schedule.id } }, otherKey);

    const migration = new RunItemFields1763690400000();
    await migration.down(runner);
    await migration.up(runner);
    await new RunItemCorrections1763690460000().up(runner);

    expect(await item(stamped)).toMatchObject({ factory_uid: 'OldFactory000000000000' });
    expect((await python(t, 'GET', '/agent/runs?factory_uid=OldFactory000000000000')).body.runs).toHaveLength(
      1,
    );
    expect((await item(root)).root_run_id).toBe(root);
    expect((await item(child)).root_run_id).toBe(root);
    expect((await item(grandchild)).root_run_id).toBe(root);
    expect((await item(scheduled)).schedule).toEqual({
      schedule_id: schedule.id,
      schedule_name: 'Old schedule',
      cron_schedule: '0 1 * * *',
    });
    expect(await item(named)).not.toHaveProperty('schedule');
    expect(await item(foreign, otherKey)).not.toHaveProperty('schedule');
  });
});

describe('runs stored before RunItemCorrections', () => {
  it('created with config.skills only read back with the first as skill_spec, found by it as a run created now is', async () => {
    const skills = ['acme/tools:triage', 'acme/tools:review'];
    const old = await created({ prompt: 'Skills only', config: { skills } });
    const both = await created({ prompt: 'Both', config: { skill_spec: 'acme/tools:review', skills } });
    // As runs were stored before the first entry became skill_spec: neither in the config nor the columns.
    await t.service.db.execute(
      `UPDATE runs SET agent_config = agent_config - 'skill_spec', skill_spec = NULL,
                       search_text = title || ' ' || prompt WHERE id = $1`,
      [old],
    );
    expect((await item(old)).agent_config).not.toHaveProperty('skill_spec');

    await new RunItemCorrections1763690460000().up(runner);
    await new RunItemCorrections1763690460000().up(runner);

    expect((await item(old)).agent_config).toMatchObject({ skill_spec: 'acme/tools:triage', skills });
    expect((await item(both)).agent_config).toMatchObject({ skill_spec: 'acme/tools:review', skills });
    const listed = async (query: string) =>
      (await python(t, 'GET', `/agent/runs?${query}`)).body.runs.map((r: any) => r.run_id);
    expect(await listed('skill_spec=acme/tools:triage')).toEqual([old]);
    expect(await listed('q=tools:triage')).toEqual([old]);
    // Once: a second run appended nothing more.
    const [row] = await t.service.db.query<{ search_text: string }>(
      `SELECT search_text FROM runs WHERE id = $1`,
      [old],
    );
    expect(row!.search_text.split('acme/tools:triage')).toHaveLength(2);
  });

  it('with a pull request artifact read back with status unknown, a reported status kept', async () => {
    const id = await created({ prompt: 'Left a pull request' });
    const [before, reported] = [
      '00000000-0000-4000-8000-0000000000a1',
      '00000000-0000-4000-8000-0000000000a2',
    ];
    await t.service.db.execute(
      `INSERT INTO run_artifacts (id, run_id, team_id, execution, artifact_type, data, position, created_at)
         SELECT x.id, r.id, r.team_id, 1, 'PULL_REQUEST', x.d, x.p, now() FROM runs r,
                unnest($2::uuid[], $3::jsonb[], $4::int[]) AS x(id, d, p) WHERE r.id = $1`,
      [
        id,
        [before, reported],
        [
          { url: 'https://example.com/pr/1', branch: 'old' },
          { url: 'https://example.com/pr/2', branch: 'new', status: 'merged' },
        ],
        [1, 2],
      ],
    );
    await new RunItemCorrections1763690460000().up(runner);

    expect((await item(id)).artifacts.map((a: any) => a.data)).toEqual([
      { url: 'https://example.com/pr/1', branch: 'old', status: 'unknown', artifact_uid: before },
      { url: 'https://example.com/pr/2', branch: 'new', status: 'merged', artifact_uid: reported },
    ]);
    expect((await python(t, 'GET', `/agent/artifacts/${before}`)).body.data.status).toBe('unknown');
  });
});

describe('runs that ended before RunErrorCodes', () => {
  it('read back with the clients’ ErrorCode where one fits and factoryd’s reason beside it, their transitions too', async () => {
    const ends = {
      agent_failed: ['FAILED', undefined],
      idle_timeout: ['FAILED', undefined],
      max_duration: ['FAILED', 'budget_exceeded'],
      lease_expired: ['ERROR', 'resource_unavailable'],
      worker_lost: ['ERROR', 'resource_unavailable'],
      environment_setup_failed: ['FAILED', 'environment_setup_failed'],
    } as const;
    const runs: Record<string, string> = {};
    for (const [code, [state]] of Object.entries(ends)) {
      runs[code] = await created({ prompt: code });
      await t.service.db.execute(
        `UPDATE runs SET state = $2, status_message = $3, ended_at = now() WHERE id = $1`,
        [
          runs[code],
          state,
          { message: `ended: ${code}`, error_code: code, ...(state === 'ERROR' ? { retryable: true } : {}) },
        ],
      );
    }
    await new RunErrorCodes1763690410000().up(runner);
    // Once is enough: a second run changes nothing.
    await new RunErrorCodes1763690410000().up(runner);

    for (const [code, [state, errorCode]] of Object.entries(ends)) {
      const run = await item(runs[code]!);
      expect(run.state).toBe(state);
      expect(run.status_message).toEqual({
        message: `ended: ${code}`,
        reason: code,
        ...(errorCode ? { error_code: errorCode } : {}),
        ...(state === 'ERROR' ? { retryable: true } : {}),
      });
      const ended = (await python(t, 'GET', `/agent/runs/${runs[code]}/timeline`)).body.timeline.at(-1);
      expect(ended.status_message).toEqual(run.status_message);
    }
  });
});

describe('runs stored before ArtifactsOneHome', () => {
  it('list the artifacts their runs.artifacts held, in its order, from run_artifacts alone', async () => {
    const id = await created({ prompt: 'Left artifacts' });
    const migration = new ArtifactsOneHome1763690450000();
    await migration.down(runner);
    // As the earlier code stored them: a row per artifact, listed again on the run (in the report's
    // order, which the random ids do not keep), and the older action's inputs on the run only.
    const [first, second] = ['00000000-0000-4000-8000-00000000000f', '00000000-0000-4000-8000-000000000001'];
    const at = '2026-11-20T10:00:00.000Z';
    await t.service.db.execute(
      `INSERT INTO run_artifacts (id, run_id, team_id, execution, artifact_type, data, created_at)
         SELECT x.id, r.id, r.team_id, 1, x.t, x.d, $2 FROM runs r,
                unnest($3::uuid[], $4::text[], $5::jsonb[]) AS x(id, t, d) WHERE r.id = $1`,
      [
        id,
        at,
        [first, second],
        ['PULL_REQUEST', 'EXTERNAL_REFERENCE'],
        [
          { url: 'https://example.com/pr/1', branch: 'fix' },
          { reference_type: 'issue', url: 'https://example.com/1' },
        ],
      ],
    );
    const items = [
      {
        artifact_type: 'PULL_REQUEST',
        created_at: at,
        data: { url: 'https://example.com/pr/1', branch: 'fix', artifact_uid: first },
      },
      {
        artifact_type: 'EXTERNAL_REFERENCE',
        created_at: at,
        data: { reference_type: 'issue', url: 'https://example.com/1', artifact_uid: second },
      },
      { type: 'file', name: 'summary.md', content: 'The summary' },
      { artifact_type: 'PULL_REQUEST', data: { url: 'https://example.com/pr/2', branch: 'older' } },
      { something: 'else' },
    ];
    await t.service.db.execute(`UPDATE runs SET artifacts = $2 WHERE id = $1`, [id, JSON.stringify(items)]);
    await migration.up(runner);

    const run = await item(id);
    expect(run.artifacts.map((a: any) => a.artifact_type)).toEqual([
      'PULL_REQUEST',
      'EXTERNAL_REFERENCE',
      'FILE',
      'PULL_REQUEST',
    ]);
    expect(run.artifacts.slice(0, 2)).toEqual(items.slice(0, 2));
    expect(run.artifacts[2].data).toMatchObject({
      filename: 'summary.md',
      mime_type: 'text/plain',
      size_bytes: 11,
    });
    expect(await artifactText(t, run.artifacts[2])).toBe('The summary');
    expect(run.artifacts[3].data).toEqual({
      url: 'https://example.com/pr/2',
      branch: 'older',
      artifact_uid: expect.any(String),
    });
    expect(
      (await python(t, 'GET', '/agent/runs?artifact_type=FILE')).body.runs.map((r: any) => r.run_id),
    ).toEqual([id]);
    const columns = await t.service.db.query(
      `SELECT 1 FROM information_schema.columns WHERE table_name = 'runs' AND column_name = 'artifacts'`,
    );
    expect(columns).toEqual([]);
  });
});
