import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordLocalService } from '../src/cli/local-service.js';
import { fromRoot } from '../src/common/paths.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * The README's client snippet, taken from the README itself (so the two cannot drift) and run as the
 * README says: saved as first-run.mjs in the checkout, `node first-run.mjs`, against a service whose
 * workers run the example harness.
 */
const run = promisify(execFile);

/** The fenced block that starts with `// first-run.mjs`. */
function readmeSnippet(): string {
  const readme = readFileSync(fromRoot('README.md'), 'utf8');
  const block = /```js\n(\/\/ first-run\.mjs[\s\S]*?)```/.exec(readme);
  if (!block) throw new Error('README.md has no ```js block starting with // first-run.mjs');
  return block[1];
}

describe('the README’s client snippet', () => {
  let t: TestService;
  // In the checkout (node_modules/.cache keeps it out of git), where `oz-agent-sdk` resolves.
  const dir = fromRoot('node_modules', '.cache', `factoryd-readme-${process.pid}`);
  beforeAll(async () => {
    t = await startTestService({ WORKER_CONCURRENCY: '1' });
    mkdirSync(dir, { recursive: true });
  });
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs as written with node and prints how the run ended', async () => {
    writeFileSync(join(dir, 'first-run.mjs'), readmeSnippet());
    const { stdout } = await run(process.execPath, ['first-run.mjs'], {
      cwd: dir,
      env: { PATH: process.env.PATH, FACTORYD_API_KEY: t.adminKey, FACTORYD_API_URL: t.url },
    });
    expect(stdout).toMatch(
      /^[0-9a-f-]{36} SUCCEEDED Done \(the example harness, no model\): summary\.md records/,
    );
  });

  it('without FACTORYD_API_URL finds the service where `npm start` in the folder recorded it, on any port (issue #30, 8)', async () => {
    writeFileSync(join(dir, 'first-run.mjs'), readmeSnippet());
    expect(new URL(t.url).port).not.toBe('8080');
    // What a serve running in this folder writes (DATA_DIR ./var).
    const forget = recordLocalService(join(dir, 'var'), {
      url: t.url,
      pid: process.pid,
      database: 'DATABASE_URL',
    });
    try {
      const { stdout } = await run(process.execPath, ['first-run.mjs'], {
        cwd: dir,
        env: { PATH: process.env.PATH, FACTORYD_API_KEY: t.adminKey },
      });
      expect(stdout).toMatch(/^[0-9a-f-]{36} SUCCEEDED /);
    } finally {
      forget();
    }
  });
});
