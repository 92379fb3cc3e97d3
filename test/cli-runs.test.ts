import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.js';
import { startTestService, type TestService } from './support/service.js';
import { eventually } from './support/eventually.js';

let t: TestService;
let env: Record<string, string>;
beforeAll(async () => {
  t = await startTestService();
  env = { FACTORYD_API_URL: t.url, FACTORYD_API_KEY: t.adminKey };
});
afterAll(async () => t?.stop());

describe('factoryd runs', () => {
  it('creates a run from stdin with source CLI, then lists, shows, follows up and cancels it', async () => {
    const created = await runCli(
      ['runs', 'create', '--title', 'From a pipe', '--metadata', 'pipeline=42', '--json'],
      {
        env,
        stdin: 'Review this diff\n+ a line',
      },
    );
    expect(created.code, created.stderr).toBe(0);
    const { run_id } = JSON.parse(created.stdout);
    const got = await t.call('GET', `/api/v1/agent/runs/${run_id}`);
    expect(got.body).toMatchObject({
      title: 'From a pipe',
      prompt: 'Review this diff\n+ a line',
      source: 'CLI',
      metadata: { pipeline: '42' },
    });

    const list = await runCli(['runs', 'list', '--state', 'QUEUED'], { env });
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^RUN\s+STATE\s+SOURCE/);
    expect(list.stdout).toContain(run_id);

    const show = await runCli(['runs', 'show', run_id], { env });
    expect(show.stdout).toContain('From a pipe');

    expect((await runCli(['runs', 'followup', run_id, 'also check the docs'], { env })).code).toBe(0);
    const cancel = await runCli(['runs', 'cancel', run_id, '--json'], { env });
    expect(JSON.parse(cancel.stdout)).toEqual({ run_id, state: 'CANCELLED' });
  });

  it('watch follows a run to its end and exits 1 when it did not succeed', async () => {
    const { body } = await t.call('POST', '/api/v1/agent/runs', { prompt: 'to be cancelled' });
    let progress = '';
    const watching = runCli(['runs', 'watch', body.run_id, '--interval', '0.2', '--json'], {
      env,
      onStderr: (c) => (progress += c),
    });
    // Cancelled once the watch printed the run's first state: it follows the run to the cancel.
    await eventually(() => progress.includes(body.run_id), 'the first progress line');
    await t.call('POST', `/api/v1/agent/runs/${body.run_id}/cancel`);
    const result = await watching;
    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ run_id: body.run_id, state: 'CANCELLED' });
    expect(result.stderr).toContain('CANCELLED');
  });

  it('show and watch say a run time as people read it, not as ISO 8601 (issue #30, 7)', async () => {
    const { body } = await t.call('POST', '/api/v1/agent/runs', { prompt: 'timed' });
    // A run that ran for 57.638 s (the API's run_time: PT57.638S).
    await t.service.db.execute(
      `UPDATE runs SET state = 'SUCCEEDED', started_at = now() - interval '57.638 seconds', ended_at = now() WHERE id = $1`,
      [body.run_id],
    );
    expect((await t.call('GET', `/api/v1/agent/runs/${body.run_id}`)).body.run_time).toBe('PT57.638S');
    const show = await runCli(['runs', 'show', body.run_id], { env });
    expect(show.stdout).toMatch(/^Run time {2}58 s$/m);
    const watched = await runCli(['runs', 'watch', body.run_id], { env });
    expect(watched.stderr).toContain(`${body.run_id}  SUCCEEDED  58 s`);
    expect(show.stdout + watched.stderr + watched.stdout).not.toContain('PT57');
  });

  it('--team takes a team’s name or its UID, as the commands on the database do (issue #30, 8)', async () => {
    const { team } = await t.newTeam('acme');
    const key = await t.newKey([t.defaultTeam, team], ['runs:read', 'runs:write']);
    const { body } = await t.call('POST', '/api/v1/agent/runs', { prompt: 'acme’s own' }, key, {
      'x-team-uid': team.uid,
    });
    const teamEnv = { ...env, FACTORYD_API_KEY: key };
    for (const given of ['acme', team.uid]) {
      const r = await runCli(['runs', 'list', '--team', given, '--json'], { env: teamEnv });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).runs.map((x: { run_id: string }) => x.run_id)).toEqual([body.run_id]);
    }
    const unknown = await runCli(['runs', 'list', '--team', 'nope'], { env: teamEnv });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('--team nope: the API key belongs to no such team; its teams: ');
    expect(unknown.stderr).toContain(`default (${t.defaultTeam.uid})`);
    expect(unknown.stderr).toContain(`acme (${team.uid})`);
  });

  it('reports API errors on stderr with a non-zero exit, and a missing key clearly', async () => {
    const missing = await runCli(['runs', 'show', '00000000-0000-0000-0000-000000000000'], { env });
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('404 resource_not_found');
    const noKey = await runCli(['runs', 'list'], { env: { FACTORYD_API_URL: t.url, FACTORYD_API_KEY: '' } });
    expect(noKey.code).not.toBe(0);
    expect(noKey.stderr).toContain('--api-key');
  });
});
