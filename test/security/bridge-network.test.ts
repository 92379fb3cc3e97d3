import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { ManagedFactories } from '../../src/management/managed-factories.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { runIn, startTestService, type TestService } from '../support/service.js';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { twoTeamsNote, twoTeamsRefused } from '../support/sandbox-check.js';

/**
 * Issue #32, 1: `network: bridge` gives a container Docker's bridge: this machine's ports through the
 * gateway, metadata addresses, the internet, none of it logged. A team's own file must not be able
 * to ask for it: only the environments the operator names (WORKER_DOCKER_BRIDGE_ENVIRONMENTS,
 * TEAM:ENVIRONMENT) may, checked when the file applies (repository or API) and again when a run is
 * claimed (docs/environments.md, "Network").
 */
// Through the package's copy where the harness's uid can read it (a 0700 checkout as root).
const harness = packageProgramCommand('test/fixtures', 'environment-harness.mjs');
const GRANT = /WORKER_DOCKER_BRIDGE_ENVIRONMENTS does not list (\S+):(\S+)\./;

let t: TestService;
const repos: TestRepo[] = [];

/** Registers a repository-backed factory of `teamId` from `files`; the outcome of its first apply. */
async function apply(teamId: string, name: string, files: Record<string, string>) {
  const repo = new TestRepo();
  repos.push(repo);
  repo.commit(files);
  const f = await t.service.app
    .get(DefinitionStore)
    .register({ teamId, name, repoUrl: repo.dir, branch: 'main' });
  return { repo, id: f!.id, outcome: await t.service.app.get(Reconciler).request(f!.id) };
}

beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '1',
    HARNESS_COMMAND: harness,
    FACTORY_POLL_SECONDS: '3600',
    WORKER_DOCKER_BRIDGE_ENVIRONMENTS: 'default:granted',
  });
  await t.service.app.get(ReconcileScheduler).firstPoll;
  await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'hook');
}, 120_000);

afterAll(async () => {
  await t?.stop();
  for (const r of repos) r.remove();
});

describe('network: bridge only where the operator grants it', () => {
  it("refuses a team's own bridge at apply, with file, line and reason; the granted one applies", async () => {
    const { repo, id, outcome } = await apply(t.defaultTeam.id, 'bridged', {
      ...baseFactory(),
      'environments/granted.yaml': 'description: the operator named it\nnetwork: bridge\n',
      'environments/open.yaml': 'description: a team asking for itself\nnetwork: bridge\n',
      'environments/plain.yaml': 'network: none\n',
    });
    expect(outcome.errors).toEqual([
      { path: 'environments/open.yaml', line: 2, message: expect.stringMatching(GRANT) },
    ]);
    expect(outcome.errors[0]!.message).toContain('default:open');
    expect(outcome.errors[0]!.message).toContain('Use network: none');
    // Nothing of that revision applied: no environment is live yet.
    expect((await t.call('GET', '/api/v1/agent/environments/granted')).status).toBe(404);

    repo.commit({ 'environments/open.yaml': null });
    const again = await t.service.app.get(Reconciler).request(id);
    expect(again.errors).toEqual([]);
    const granted = await t.call('GET', '/api/v1/agent/environments/granted');
    expect(granted.status).toBe(200);
    expect(granted.body.config.network).toBe('bridge');
  });

  it("does not give another team's environment of the granted name the bridge", async () => {
    const other = await t.newTeam('other');
    await t.service.app.get(SecretsService).set(other.team.id, 'hook-secret', 'hook');
    const { outcome } = await apply(other.team.id, 'theirs', {
      ...baseFactory(),
      'environments/granted.yaml': 'network: bridge\n',
    });
    expect(outcome.errors).toEqual([
      { path: 'environments/granted.yaml', line: 1, message: expect.stringMatching(GRANT) },
    ]);
    expect(outcome.errors[0]!.message).toContain('other:granted');
  });

  it('answers the environments API 400 with the file and line', async () => {
    const { factory } = await t.service.app.get(ManagedFactories).create({
      team: t.defaultTeam,
      name: 'managed-bridge',
      branch: 'main',
      author: { name: 'Setup', email: 'setup@example.com' },
    });
    const res = await t.call('POST', '/api/v1/agent/environments', {
      name: 'wide-open',
      factory_uid: factory.uid,
      network: 'bridge',
    });
    expect(res.status).toBe(400);
    expect(res.body.invalid_params[0].name).toMatch(/^environments\/wide-open\.yaml:\d+$/);
    expect(res.body.detail).toMatch(GRANT);
    expect((await t.call('GET', '/api/v1/agent/environments/wide-open')).status).toBe(404);
  });

  it.skipIf(twoTeamsRefused)(
    `fails a run at its claim whose stored environment asks for a bridge the operator did not grant${twoTeamsNote}`,
    async () => {
      // As stored before the rule, or before the operator took it off the list.
      await t.service.db.execute(
        `UPDATE environments SET config = config || '{"network": "bridge"}' WHERE name = 'plain'`,
      );
      const refused = await t.call('POST', '/api/v1/agent/runs', {
        prompt: '{}',
        config: { environment_id: 'plain' },
      });
      expect(refused.status).toBe(200);
      const ended = await runIn(t, refused.body.run_id, ['SUCCEEDED', 'FAILED', 'ERROR']);
      expect(ended.state).toBe('FAILED');
      expect(ended.status_message.error_code).toBe('environment_setup_failed');
      expect(ended.status_message.message).toMatch(GRANT);
      expect(ended.status_message.message).toContain('default:plain');

      // The granted one runs (this worker's backend is the host's: the network is Docker's business).
      const granted = await t.call('POST', '/api/v1/agent/runs', {
        prompt: '{}',
        config: { environment_id: 'granted' },
      });
      expect((await runIn(t, granted.body.run_id, ['SUCCEEDED', 'FAILED', 'ERROR'])).state).toBe('SUCCEEDED');
    },
  );
});
