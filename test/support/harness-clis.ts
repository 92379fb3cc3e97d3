import { execFileSync, spawnSync } from 'node:child_process';
import type { BuiltInHarness } from '../../src/harnesses/harness-types.js';
import { checkoutHarnessesDir, findCli } from '../../src/harnesses/installed-clis.js';
import { CLI } from './cli.js';

/**
 * The agent CLIs the tests drive: one cache for every test file (HARNESSES_DIR, else the checkout's,
 * `checkoutHarnessesDir`), filled by `factoryd harnesses install` (CI does it before `npm test`, into
 * the same folder; a test file does it when it is missing). Outside DATA_DIR and the package's `var`,
 * and bound read-only into the bwrap sandbox either way.
 */
export const TEST_HARNESSES_DIR = process.env.HARNESSES_DIR ?? checkoutHarnessesDir();

/** The CLI's path, or why it cannot be used here (the test then skips, saying so). */
export function testCli(type: BuiltInHarness): { path?: string; skip?: string } {
  const env = { ...process.env, PATH: '', [`${type.toUpperCase()}_COMMAND`]: '' };
  let path = findCli(type, env, TEST_HARNESSES_DIR);
  if (!path) {
    const out = spawnSync(process.execPath, [CLI, 'harnesses', 'install', type], {
      env: { ...process.env, HARNESSES_DIR: TEST_HARNESSES_DIR },
      encoding: 'utf8',
      timeout: 300_000,
    });
    if (out.status !== 0)
      return {
        skip: `${type} CLI could not be installed: ${(out.stderr || out.stdout).trim().split('\n').at(-1)}`,
      };
    path = findCli(type, env, TEST_HARNESSES_DIR);
  }
  if (!path) return { skip: `${type} CLI not found in ${TEST_HARNESSES_DIR} after its install` };
  try {
    execFileSync(path, ['--version'], { timeout: 30_000, stdio: 'pipe' });
  } catch (err) {
    return { skip: `${type} CLI does not start here: ${(err as Error).message.split('\n')[0]}` };
  }
  return { path };
}
