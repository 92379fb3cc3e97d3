import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFINITION_LIMITS } from '../../src/definitions/definition.js';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { runCli } from '../support/cli.js';
import { baseFactory, TestRepo } from '../support/git-repo.js';
import { startTestService, type TestService } from '../support/service.js';

/**
 * Definition files are data (issue #13): a team's commit can run no code in factoryd, and cannot
 * take its memory or CPU. Each attack is committed to a real git repository and reconciled by the
 * real reconciler, as a team would make it; the validate attacks run the built `factoryd` binary.
 */
const ENV = { FACTORY_POLL_SECONDS: '3600', SECRETS_KEY: randomBytes(32).toString('base64') };
const MARKER = join(tmpdir(), `factoryd-front-matter-ran-${process.pid}`);
/** Front matter that, evaluated as JavaScript, writes MARKER (gray-matter's `javascript` engine did). */
const JS_FRONT_MATTER = `---js\n(function () { require('fs').writeFileSync(${JSON.stringify(MARKER)}, 'ran'); return { description: 'x' }; })()\n---\nHow to triage.\n`;
/** Nine aliases of nine aliases of nine…: 9^5 values once expanded, from a few hundred bytes. */
const ALIAS_BOMB = [
  'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
  'b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]',
  'c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]',
  'd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]',
  'e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]',
].join('\n');
const MiB = 1024 * 1024;

describe('definition files are data, within limits', () => {
  let t: TestService;
  let repo: TestRepo;
  let reconciler: Reconciler;
  let factoryId: string;
  let factoryUid: string;
  let good: string;

  beforeAll(async () => {
    t = await startTestService(ENV);
    reconciler = t.service.app.get(Reconciler);
    await t.service.app.get(ReconcileScheduler).firstPoll;
    await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'a-value');
    repo = new TestRepo();
    const f = await t.service.app
      .get(DefinitionStore)
      .register({ teamId: t.defaultTeam.id, name: 'attacked', repoUrl: repo.dir, branch: 'main' });
    factoryId = f!.id;
    factoryUid = f!.uid;
    good = repo.commit(baseFactory(), 'good');
    expect(await reconciler.request(factoryId)).toMatchObject({ result: 'applied', errors: [] });
  });
  afterAll(async () => {
    await t?.stop();
    repo?.remove();
    rmSync(MARKER, { force: true });
  });
  beforeEach(() => rmSync(MARKER, { force: true }));

  const status = async () => (await t.call('GET', `/api/v1/factory/${factoryUid}`)).body;
  const applies = async () =>
    (await t.call('GET', `/api/v1/factory/${factoryUid}/applies?limit=100`)).body.applies as any[];

  /** Commits the good factory plus `files` (and nothing else of earlier attacks); returns the SHA. */
  function commitAttack(files: Record<string, string>): string {
    repo.git('rm', '-rq', '.');
    return repo.commit({ ...baseFactory(), ...files }, 'attack');
  }

  /**
   * The attack is recorded once as a failed apply (ValidationFailed) with `error`; the good revision
   * stays live; the next poll of the same head attempts nothing and records nothing.
   */
  async function expectRefused(sha: string, error: { path: string; line: number; message: RegExp }) {
    // This request or the repository's ref watch (whichever comes first) attempts the head: once the
    // request resolves, the attempt is recorded either way.
    await reconciler.request(factoryId);
    expect(await status()).toMatchObject({
      last_attempted_revision: sha,
      last_applied_revision: good,
      ready: false,
      reason: 'ValidationFailed',
    });
    const recorded = (await applies()).filter((a) => a.revision === sha);
    expect(recorded).toHaveLength(1);
    expect(recorded[0].result).toBe('failed');
    expect(recorded[0].errors).toContainEqual({
      path: error.path,
      line: error.line,
      message: expect.stringMatching(error.message),
    });
    // `factoryd plan` and `apply` run this same reconciler: the dry run refuses the head the same way.
    expect((await reconciler.plan(factoryId)).errors).toContainEqual(
      recorded[0].errors.find((e: any) => e.path === error.path),
    );
    await t.service.app.get(ReconcileScheduler).pollAll();
    expect(await reconciler.request(factoryId)).toMatchObject({ result: 'noop' });
    expect((await applies()).filter((a) => a.revision === sha)).toHaveLength(1);
  }

  describe('front matter reaches no engine that runs code', () => {
    it('a `---js` skill is refused at its line 1 and its expression never runs (reconciler)', async () => {
      const sha = commitAttack({ 'skills/x/SKILL.md': JS_FRONT_MATTER });
      await expectRefused(sha, {
        path: 'skills/x/SKILL.md',
        line: 1,
        message: /^front matter must open with a bare `---` line; `---js` would name an engine/,
      });
      expect(existsSync(MARKER)).toBe(false);
    });

    it('a `---js` skill is refused by `factoryd validate` (a child process) and never runs', async () => {
      const folder = new TestRepo();
      try {
        folder.commit({ ...baseFactory(), 'skills/x/SKILL.md': JS_FRONT_MATTER });
        const r = await runCli(['validate', folder.dir]);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain(
          'skills/x/SKILL.md:1: front matter must open with a bare `---` line; `---js` would name an engine and only YAML is read',
        );
        expect(existsSync(MARKER)).toBe(false);
      } finally {
        folder.remove();
      }
    });

    it('`---json` front matter is refused too', async () => {
      const sha = commitAttack({
        'agents/fixer/agent.md': '---json\n{"description": "Fixes bugs"}\n---\nYou fix bugs.\n',
      });
      await expectRefused(sha, {
        path: 'agents/fixer/agent.md',
        line: 1,
        message: /`---json` would name an engine/,
      });
    });
  });

  describe('sizes are checked before a file is read', () => {
    it('a file over 1 MiB is refused from its listed size; the last good revision stays live', async () => {
      const head = '---\ndescription: big\n---\n';
      const sha = commitAttack({ 'skills/big/SKILL.md': head + 'x'.repeat(3 * MiB - head.length) });
      // The exact size comes from `git ls-tree -l`: the blob was never read into memory.
      await expectRefused(sha, {
        path: 'skills/big/SKILL.md',
        line: 1,
        message:
          /^the file is 3\.0 MiB \(3,145,728 bytes\); a definition file may be at most 1\.0 MiB .*: it was not read$/,
      });
    });

    it('more definition files in a tree than the limit are refused', async () => {
      const limit = DEFINITION_LIMITS.treeFiles;
      const skills: Record<string, string> = {};
      for (let i = 0; i < limit; i++)
        skills[`skills/s${String(i).padStart(4, '0')}/SKILL.md`] = `---\ndescription: s${i}\n---\nStep.\n`;
      const sha = commitAttack(skills);
      const base = Object.keys(baseFactory());
      const total = limit + base.length;
      // The first file over the limit, in path order: the base factory's files before skills/ come first.
      const first = limit - base.filter((p) => p < 'skills/').length;
      await expectRefused(sha, {
        path: `skills/s${String(first).padStart(4, '0')}/SKILL.md`,
        line: 1,
        message: new RegExp(`^the factory has ${total} definition files; the limit is ${limit}`),
      });
    });

    it('more than 8 MiB of definition files in a tree are refused', async () => {
      const skills: Record<string, string> = {};
      for (let i = 0; i < 9; i++)
        skills[`skills/s${i}/SKILL.md`] = `---\ndescription: s${i}\n---\n${'y'.repeat(1_000_000)}`;
      const sha = commitAttack(skills);
      await expectRefused(sha, {
        path: 'skills/s8/SKILL.md',
        line: 1,
        message: /together they may be at most 8\.0 MiB/,
      });
    });
  });

  describe('YAML alias bombs are recorded once, never retried on every poll', () => {
    it('in webhooks/x.yaml', async () => {
      const sha = commitAttack({ 'webhooks/x.yaml': `secretName: hook-secret\n${ALIAS_BOMB}\n` });
      await expectRefused(sha, { path: 'webhooks/x.yaml', line: 3, message: /aliases expand too much/ });
    });

    it('in front matter', async () => {
      const sha = commitAttack({
        'agents/bomb/agent.md': `---\ndescription: boom\n${ALIAS_BOMB}\n---\nBoom.\n`,
      });
      await expectRefused(sha, { path: 'agents/bomb/agent.md', line: 4, message: /aliases expand too much/ });
    });
  });

  it('the parse cache stays within its byte bound over many distinct large-but-allowed files', async () => {
    const cache = reconciler.parsed;
    let files = 0;
    for (let commit = 0; commit < 5; commit++) {
      const skills: Record<string, string> = {};
      for (let i = 0; i < 8; i++, files++)
        skills[`skills/big${i}/SKILL.md`] =
          `---\ndescription: c${commit}\n---\n${String(commit).repeat(1_000_000)}`;
      const sha = commitAttack(skills);
      await reconciler.request(factoryId); // or the ref watch first: applied either way once it resolves
      expect(await status()).toMatchObject({ last_applied_revision: sha, ready: true });
      expect(cache.bytes).toBeLessThanOrEqual(cache.maxBytes);
    }
    // 40 distinct files of about 1 MB went through it: the oldest were let go.
    expect(cache.maxBytes).toBe(32 * MiB);
    expect(cache.size).toBeLessThan(files);
    expect(cache.bytes).toBeGreaterThan(16 * MiB);
  });
});
