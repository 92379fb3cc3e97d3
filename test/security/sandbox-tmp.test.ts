import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { chooseSandbox, harnessSpawn } from '../../src/workers/launcher/sandbox.js';
import { bwrapMissing } from '../support/sandbox-check.js';

/**
 * A checkout under /tmp (CI's clone, `git clone … /tmp/x`): bwrap gives a harness a private /tmp, but
 * the package's own files, which the example harnesses run from, are bound back; the rest of /tmp,
 * the service's DATA_DIR with it, stays out of sight.
 */
const bwrapWorks = bwrapMissing() === undefined;

describe.skipIf(!bwrapWorks)('bwrap with the package under /tmp (skipped: bwrap cannot run here)', () => {
  const base = mkdtempSync(join(tmpdir(), 'factoryd-sandbox-tmp-'));
  chmodSync(base, 0o755);
  // After the run has ended the launcher still tidies its workspace into a spare here: retried while it does.
  afterAll(() => rmSync(base, { recursive: true, force: true, maxRetries: 5 }));

  it('runs a harness from the package, and shows it nothing else of /tmp', () => {
    const packageRoot = join(base, 'checkout');
    const dataDir = join(base, 'data');
    mkdirSync(join(packageRoot, 'examples'), { recursive: true });
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(join(dataDir, 'secrets.key'), 'not for harnesses');
    writeFileSync(join(packageRoot, 'examples', 'harness.sh'), 'echo harness ran\n');
    const workspaceRoot = join(dataDir, 'workspaces');
    const { sandbox } = chooseSandbox(
      {
        requested: 'bwrap',
        harnessUser: { uid: 65534, gid: 65534 },
        harnessUids: { first: 1900000, last: 1900001 },
        dataDir,
        packageRoot,
      },
      workspaceRoot,
    );
    const cwd = join(workspaceRoot, 'run-1');
    mkdirSync(cwd, { recursive: true, mode: 0o777 });
    chmodSync(cwd, 0o777);
    const command = `sh ${packageRoot}/examples/harness.sh; cat ${dataDir}/secrets.key || echo no key; ls ${base} ${dataDir}`;
    const { file, args, uid, gid } = harnessSpawn(sandbox, command, cwd);
    const out = spawnSync(file, args, { uid, gid, encoding: 'utf8', env: { PATH: process.env.PATH } });
    expect(out.stdout, out.stderr).toContain('harness ran');
    expect(out.stdout).toContain('no key');
    // Of the temp folder only the package and the path to the run's own workspace are there.
    expect(out.stdout).toContain(`${base}:\ncheckout\ndata\n`);
    expect(out.stdout).toContain(`${dataDir}:\nworkspaces\n`);
  });
});
