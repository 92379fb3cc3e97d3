import { mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { TestRepo } from './support/git-repo.js';
import { runIn, startTestService, type TestService } from './support/service.js';

// Skills through real runs: a run's skill_spec resolves from a factory the team has, and the
// usage report counts loads by the rules of docs/workers.md.
let t: TestService;
let folder: string;
beforeAll(async () => {
  t = await startTestService({ WORKER_CONCURRENCY: '2' });
  // The factory `acme` from a real repository at …/acme/factory, as owner/repo `acme/factory` names it.
  const repo = new TestRepo();
  repo.commit({
    'factory.yaml': 'schemaVersion: v1alpha1\nname: acme\n',
    'agents/lead/agent.md': '---\nagentType: FOREMAN\ndescription: Leads\n---\nYou lead.\n',
    'skills/triage/SKILL.md': '---\nname: triage\n---\nLabel the issue.\n/skill release',
    'skills/release/SKILL.md': '---\nname: release\n---\nCut a release.',
  });
  folder = mkdtempSync(join(tmpdir(), 'factoryd-skills-'));
  mkdirSync(join(folder, 'acme'));
  renameSync(repo.dir, join(folder, 'acme', 'factory'));
  const factory = await t.service.app.get(DefinitionStore).register({
    teamId: t.defaultTeam.id,
    name: 'acme',
    repoUrl: join(folder, 'acme', 'factory'),
    branch: 'main',
  });
  const applied = await t.service.app.get(Reconciler).request(factory!.id);
  expect(applied.errors).toEqual([]);
});
afterAll(async () => {
  await t?.stop();
  rmSync(folder, { recursive: true, force: true });
});

const finished = (id: string) => runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR']);

describe('skills', () => {
  it('starts a run from a skill: the skill is its base prompt and its name the config name', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', {
      skill: 'acme/factory:triage',
      prompt: 'New issue',
    });
    const run = await finished(res.body.run_id);
    expect(run.state).toBe('SUCCEEDED');
    expect(run.agent_config.name).toBe('triage');
    const conversation = (await t.call('GET', `/api/v1/agent/runs/${run.run_id}/conversation`)).body;
    // Messages and actions both, as the API documents them (schemas/api/conversation-message.schema.json).
    expect(new SchemaRegistry().check('RunConversationResponse', conversation)).toEqual([]);
    const texts = conversation.messages.map((m: any) => m.text ?? m.input?.skill_path);
    // The reconciler stores a skill's body without its front matter: two lines.
    expect(texts).toContain('Following my instructions (2 lines of base prompt).');
    // The skill's own directive loaded another managed skill from the workspace.
    expect(texts).toContain('factory-skills/acme/skills/release/SKILL.md');
  });

  it('reports team-owned skill usage: managed paths counted, bundled grouped apart, others not counted', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', {
      prompt: 'Crafted\n/skill triage\n/bundled-skill pr-comments\nplease use skill nonexistent',
    });
    const run = await finished(res.body.run_id);
    // A load outside any managed root, as another harness might report it.
    await t.service.db.execute(
      `INSERT INTO run_events (run_id, team_id, execution, type, kind, body, created_at)
       VALUES ($1, $2, 1, 'action', 'read_skill', $3, now())`,
      [
        run.run_id,
        t.defaultTeam.id,
        JSON.stringify({ input: { skill_path: '/home/me/.agents/skills/triage/SKILL.md' } }),
      ],
    );
    const usage = await t.call('GET', '/api/v1/skills/usage');
    expect(usage.status).toBe(200);
    const triage = usage.body.skills.find((s: any) => s.skill === 'triage');
    expect(triage).toMatchObject({ factory: 'acme', path: 'skills/triage/SKILL.md', loads: 1, runs: 1 });
    expect(usage.body.skills.find((s: any) => s.skill === 'release')).toMatchObject({ loads: 1, runs: 1 });
    expect(usage.body.bundled).toEqual([{ bundled_skill_id: 'pr-comments', loads: 1 }]);
    expect(usage.body.not_counted).toEqual({ outside_managed_roots: 1 });
    expect(new SchemaRegistry().check('SkillUsageResponse', usage.body)).toEqual([]);

    const later = await t.call('GET', '/api/v1/skills/usage?since=2999-01-01');
    expect(later.body.skills).toEqual([]);
    const bad = await t.call('GET', '/api/v1/skills/usage?since=yesterday');
    expect(bad.status).toBe(400);
    expect(bad.body.detail).toMatch(/since must be a date/);
    // Another team sees none of it.
    const other = await t.newTeam('skills-other');
    expect((await t.call('GET', '/api/v1/skills/usage', undefined, other.key)).body.skills).toEqual([]);
  });

  it('answers 404 for the conversation of an unknown run', async () => {
    const res = await t.call('GET', '/api/v1/agent/runs/00000000-0000-4000-8000-000000000000/conversation');
    expect(res.status).toBe(404);
  });
});
