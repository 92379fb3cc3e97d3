import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GitRunner } from '../../src/git/git-runner.js';

/**
 * git runs helpers (ssh, credential helpers, commands a local repository's config names): none of
 * them gets the service's configuration or credentials.
 */
describe('the environment of a git call', () => {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-git-env-'));
  const saved = { ...process.env };
  afterAll(() => {
    process.env = saved;
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds nothing of the service: no DATABASE_URL, SECRETS_KEY, DATA_DIR or FACTORYD_API_KEY', async () => {
    Object.assign(process.env, {
      DATABASE_URL: 'postgres://owner:hunter2@db/factoryd',
      SECRETS_KEY: 'c2VjcmV0',
      DATA_DIR: '/srv/factoryd',
      FACTORYD_API_KEY: 'fdk_secret',
      KEEP_ME: 'yes',
    });
    const runner = new GitRunner({ gitTimeoutSeconds: 10 });
    // A shell alias: git starts `env` as its own child, as it would a helper.
    const env = (await runner.text(['-c', 'alias.showenv=!env', 'showenv'], dir)).split('\n');
    const names = env.map((line) => line.slice(0, line.indexOf('=')));
    expect(names).toContain('KEEP_ME');
    expect(
      names.filter((n) => ['DATABASE_URL', 'SECRETS_KEY', 'DATA_DIR', 'FACTORYD_API_KEY'].includes(n)),
    ).toEqual([]);
  });
});
