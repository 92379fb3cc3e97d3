import { lstatSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT_CLUSTERS_DIR } from '../../src/database/embedded-postgres.js';
import { eventually } from '../support/eventually.js';
import {
  request,
  startServeProcess,
  unexpectedAnswers,
  type Answer,
  type ServeProcess,
} from '../support/serve-process.js';

/**
 * Issue #14: `npm start` with its own PostgreSQL (no DATABASE_URL), in a fresh `mktemp -d` folder
 * (mode 0700, which the `postgres` user cannot pass through when we run as root), and its postmaster
 * killed under load. The service restarts it and answers 503 with Retry-After meanwhile, never 500;
 * it stops it when it stops.
 */
const root = userInfo().uid === 0;
let dataDir: string;
let serve: ServeProcess;
let cluster: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'factoryd-embedded-'));
  serve = await startServeProcess({ DATABASE_URL: '', DATA_DIR: dataDir, WORKER_CONCURRENCY: '0' });
  cluster = realpathSync(join(dataDir, 'pg'));
}, 180_000);
afterAll(async () => {
  await serve?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  if (cluster?.startsWith(ROOT_CLUSTERS_DIR)) rmSync(cluster, { recursive: true, force: true });
});

/** The running postmaster's pid, from its pid file. */
const postmaster = (): number =>
  Number(readFileSync(join(cluster, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('the embedded PostgreSQL', () => {
  it.skipIf(!root)(
    'as root in a folder postgres cannot reach: starts, the cluster where postgres can, and says where',
    () => {
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      expect(lstatSync(join(dataDir, 'pg')).isSymbolicLink()).toBe(true);
      expect(cluster.startsWith(`${ROOT_CLUSTERS_DIR}/`)).toBe(true);
      expect(serve.output()).toContain(`database: embedded PostgreSQL under ${cluster}`);
    },
  );

  for (const signal of ['SIGKILL', 'SIGINT'] as const) {
    it(`killed with ${signal} under load: 503 + Retry-After meanwhile, restarted, everything works again`, async () => {
      const api = `${serve.url}/api/v1`;
      const key = serve.adminKey;
      const answers: Answer[] = [];
      let stop = false;
      const worker = async () => {
        while (!stop) {
          answers.push(
            await request('run', `${api}/agent/runs`, { method: 'POST', key, body: { prompt: 'x' } }),
          );
          answers.push(await request('list', `${api}/agent/runs?limit=3`, { key }));
          answers.push(await request('readyz', `${serve.url}/readyz`));
        }
      };
      const load = Array.from({ length: 4 }, worker);
      const killed = postmaster();
      try {
        await eventually(() => answers.length > 20, 'load before the kill');
        process.kill(killed, signal);
        await eventually(() => answers.some((a) => a.status === 503), 'a 503 while the database is down');
        await eventually(() => !alive(killed) && alive(postmaster()), 'a new postmaster');
        await eventually(() => answers.slice(-12).every((a) => a.status === 200), 'every answer 200 again', {
          timeoutMs: 60_000,
        });
      } finally {
        stop = true;
        await Promise.all(load);
      }
      expect(serve.child.exitCode, serve.output()).toBeNull();
      expect(unexpectedAnswers(answers)).toEqual([]);
      const down = answers.filter((a) => a.status === 503);
      expect(down.every((a) => a.body?.error === 'service_unavailable' && a.body?.retryable === true)).toBe(
        true,
      );
    }, 120_000);
  }

  it('stops with the service', async () => {
    const pid = postmaster();
    expect(await serve.stop()).toBe(0);
    expect(alive(pid)).toBe(false);
  });
});
