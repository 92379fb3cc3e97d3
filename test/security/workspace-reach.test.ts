import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../support/database.js';
import { eventually } from '../support/eventually.js';
import { request, startServeProcess, type ServeProcess } from '../support/serve-process.js';
import { bwrapMissing } from '../support/sandbox-check.js';

/**
 * As root, harnesses run as other uids. A service started from a folder those uids cannot pass through
 * (a checkout under /root, a `mktemp -d`: mode 0700) still gives its harnesses a workspace they can
 * write to by absolute path — what every real harness does with $FACTORYD_WORKSPACE. Found by the
 * README walkthrough run from a fresh clone in /tmp without bubblewrap: the example harness failed
 * with EACCES on its summary.md.
 */
const root = process.getuid?.() === 0;
const bwrapWorks = bwrapMissing() === undefined;
const modes = [
  { mode: 'user', skip: !root && 'the service is not root (harnesses run as its own user)' },
  {
    mode: 'bwrap',
    skip: (!root && 'the service is not root') || (!bwrapWorks && 'bwrap cannot run here'),
  },
] as const;

describe('a harness workspace reachable by the harness’s uid when DATA_DIR lies in a 0700 folder', () => {
  let closed: string;
  beforeAll(() => {
    closed = mkdtempSync(join(tmpdir(), 'factoryd-closed-')); // mode 0700, owned by root
  });
  afterAll(() => rmSync(closed, { recursive: true, force: true }));

  for (const { mode, skip } of modes) {
    it.skipIf(Boolean(skip))(
      `${mode}: the harness writes $FACTORYD_WORKSPACE/out.txt${skip ? ` (skipped: ${skip})` : ''}`,
      async () => {
        expect(statSync(closed).mode & 0o777).toBe(0o700);
        const dataDir = join(closed, mode);
        mkdirSync(dataDir);
        // A database of its own: each DATA_DIR generates its own secrets key.
        const db = await createTestDatabase();
        let served: ServeProcess | undefined;
        try {
          served = await startServeProcess({
            DATABASE_URL: db.url,
            DATA_DIR: dataDir,
            HARNESS_SANDBOX: mode,
            WORKER_CONCURRENCY: '1',
            FACTORY_POLL_SECONDS: '3600',
            HARNESS_COMMAND: `sh -c 'echo written > "$FACTORYD_WORKSPACE/out.txt" && cat "$FACTORYD_WORKSPACE/out.txt"'`,
            LOG_LEVEL: 'info',
          });
          const created = await request('create', `${served.url}/api/v1/agent/runs`, {
            method: 'POST',
            key: served.adminKey,
            body: { prompt: 'write a file' },
          });
          expect(created.status).toBe(200);
          const run = await eventually(async () => {
            const r = await request('get', `${served!.url}/api/v1/agent/runs/${created.body.run_id}`, {
              key: served!.adminKey,
            });
            return ['SUCCEEDED', 'FAILED', 'ERROR'].includes(r.body?.state) && r.body;
          }, 'the run to end');
          expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
          expect(served.output()).toMatch(/workspaces under \/var\/lib\/factoryd\/workspaces\/[0-9a-f]{16}/);
        } finally {
          await served?.stop();
          await db.drop();
        }
      },
    );
  }
});
