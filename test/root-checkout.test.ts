// As root, a checkout where no other user can pass (under /root, in a `mktemp -d`: both 0700) still
// starts, runs a run through the example harness, and runs its tests on a throwaway embedded cluster:
// the `postgres` user and the harnesses' uids run from copies made under /var/lib/factoryd/runtime
// (docs/operations.md, "As root"). The checkout is this one's working tree, copied into a 0700 folder.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { eventually } from './support/eventually.js';
import { request, startServeProcess, type ServeProcess } from './support/serve-process.js';

const notRoot =
  process.getuid?.() !== 0 &&
  'not root: the other users this is about (postgres, harness uids) only exist for root';

describe.skipIf(Boolean(notRoot))(
  `a checkout in a 0700 folder, as root${notRoot ? ` (skipped: ${notRoot})` : ''}`,
  () => {
    let closed: string;
    let checkout: string;

    beforeAll(() => {
      closed = mkdtempSync(join(tmpdir(), 'factoryd-0700-'));
      chmodSync(closed, 0o700);
      checkout = join(closed, 'factoryd');
      copyCheckout(fromRoot(), checkout);
    }, 120_000);

    afterAll(() => rmSync(closed, { recursive: true, force: true }));

    it('starts on its embedded database and runs a run through the example harness to SUCCEEDED', async () => {
      expect(statSync(closed).mode & 0o777).toBe(0o700);
      let served: ServeProcess | undefined;
      try {
        served = await startServeProcess(
          { WORKER_CONCURRENCY: '1', FACTORY_POLL_SECONDS: '3600' },
          { checkout },
        );
        expect((await request('healthz', `${served.url}/healthz`)).status).toBe(200);
        const created = await request('create', `${served.url}/api/v1/agent/runs`, {
          method: 'POST',
          key: served.adminKey,
          body: { prompt: 'Fix the flaky test in ci/' },
        });
        expect(created.status).toBe(200);
        const run = await eventually(async () => {
          const r = await request('run', `${served!.url}/api/v1/agent/runs/${created.body.run_id}`, {
            key: served!.adminKey,
          });
          return ['SUCCEEDED', 'FAILED', 'ERROR'].includes(r.body?.state) && r.body;
        }, 'the run to end');
        expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      } finally {
        expect(await served?.stop()).toBe(0);
      }
    }, 120_000);

    it('runs a test file there on a throwaway embedded cluster', () => {
      const env = Object.fromEntries(
        Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL' && !k.startsWith('VITEST')),
      );
      const out = spawnSync(
        process.execPath,
        [join(checkout, 'node_modules/vitest/vitest.mjs'), 'run', 'test/handoff.test.ts'],
        {
          cwd: checkout,
          env: { ...env, NO_COLOR: '1', FORCE_COLOR: '0' },
          encoding: 'utf8',
          timeout: 180_000,
        },
      );
      const text = `${out.stdout}\n${out.stderr}`;
      expect(out.status, text).toBe(0);
      expect(text).toContain('a throwaway embedded PostgreSQL');
      expect(text).toMatch(/Tests\s+\S*\s*\d+ passed/);
    }, 200_000);
  },
);

/**
 * The working tree as a clone would have it (tracked and new files, not what .gitignore names), with
 * `node_modules` linked file by file (as fast as a rename; `npm ci` would take a minute) and `dist/`
 * copied newer than its sources, so neither the start nor the tests rebuild it.
 */
function copyCheckout(from: string, to: string): void {
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], {
    cwd: from,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((f) => f && existsSync(join(from, f)));
  for (const file of files) {
    const target = join(to, file);
    mkdirSync(dirname(target), { recursive: true });
    cpSync(join(from, file), target, { preserveTimestamps: true });
  }
  linkTree(join(from, 'node_modules'), join(to, 'node_modules'));
  cpSync(join(from, 'dist'), join(to, 'dist'), { recursive: true });
  const now = new Date(Date.now() + 60_000);
  const touch = (p: string): void => {
    utimesSync(p, now, now);
    if (statSync(p).isDirectory()) for (const e of readdirSync(p)) touch(join(p, e));
  };
  touch(join(to, 'dist'));
}

/** `cp -al`: folders made, files hard-linked (copied where a link cannot be made), links kept. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  for (const e of readdirSync(from, { withFileTypes: true })) {
    const [src, dst] = [join(from, e.name), join(to, e.name)];
    if (e.isDirectory()) linkTree(src, dst);
    else if (e.isSymbolicLink()) cpSync(src, dst, { verbatimSymlinks: true });
    else
      try {
        linkSync(src, dst);
      } catch {
        cpSync(src, dst);
      }
  }
}
