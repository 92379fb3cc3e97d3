import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { runCli } from '../support/cli.js';
import { createTestDatabase } from '../support/database.js';
import { eventually } from '../support/eventually.js';
import {
  request,
  startServeProcess,
  unexpectedAnswers,
  type Answer,
  type ServeProcess,
} from '../support/serve-process.js';

/**
 * Issue #14: PostgreSQL connections cut under the service (pg_terminate_backend, what a failover, a
 * restart of the server or an administrator does). The process lives; each request the cut reaches
 * fails alone with a 503 and Retry-After; no 202 without its delivery row; a management write either
 * answers 2xx or is not applied; and afterwards everything works.
 */
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataDir: string;
let serve: ServeProcess | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'factoryd-dbfaults-'));
}, 180_000);
afterAll(async () => {
  await serve?.stop();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

/**
 * Cuts every connection of the service's database, from a connection of its own to the test server's
 * admin database (one per round: tests of other files share that server and may cut connections too).
 */
async function terminateBackends(databaseName: string): Promise<number> {
  const admin = new pg.Client({ connectionString: inject('adminDatabaseUrl') });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: string }>(
      `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
        WHERE datname = $1 AND pid <> pg_backend_pid()`,
      [databaseName],
    );
    return Number(rows[0]!.n);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

const git = (dir: string, ...args: string[]) => execFileSync('git', args, { cwd: dir, encoding: 'utf8' });

describe('database connections terminated at random under load', () => {
  it('the process lives, every 202 has its row, answers are 2xx/4xx/503 + Retry-After, and it recovers', async () => {
    const env = {
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000',
      WORKER_CONCURRENCY: '1',
      FACTORY_POLL_SECONDS: '1',
    };
    serve = await startServeProcess(env);
    const { url, adminKey: key } = serve;
    const api = `${url}/api/v1`;

    // A managed factory with two webhooks: one takes deliveries, the other takes management writes.
    const added = await runCli(['factories', 'add', 'ops', '--managed'], { env });
    expect(added.code, added.stderr).toBe(0);
    const factories = await request('list', `${api}/factory?search=ops`, { key });
    const factoryUid = (factories.body.factories as Array<{ uid: string; name: string }>).find(
      (f) => f.name === 'ops',
    )!.uid;
    const create = (name: string) =>
      request('create', `${api}/factory/${factoryUid}/webhooks`, { method: 'POST', key, body: { name } });
    const ingress = (await create('ingress')).body as { webhook: { uid: string }; secret: string };
    const target = (await create('target')).body as { webhook: { uid: string } };
    expect(ingress.secret).toBeTruthy();
    await eventually(
      async () =>
        (
          await request('probe', `${url}/webhooks/w/${ingress.webhook.uid}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${ingress.secret}` },
            body: { probe: true },
          })
        ).status === 202,
      'the ingress webhook to take deliveries',
    );

    const answers: Answer[] = [];
    const accepted: string[] = [];
    /** Descriptions whose PATCH answered 2xx, in order; every other one must not be applied. */
    const confirmed: string[] = [];
    let stop = false;
    let n = 0;
    const loop = async (work: () => Promise<void>) => {
      while (!stop) await work();
    };
    const sender = () =>
      loop(async () => {
        const id = `fault-${n++}`;
        const a = await request('ingress', `${url}/webhooks/w/${ingress.webhook.uid}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ingress.secret}`, 'x-service-delivery-id': id },
          body: { id },
        });
        answers.push(a);
        if (a.status === 202) accepted.push((a.body as { delivery_id: string }).delivery_id);
      });
    const runApi = () =>
      loop(async () => {
        answers.push(
          await request('run', `${api}/agent/runs`, { method: 'POST', key, body: { prompt: 'x' } }),
        );
        answers.push(await request('list', `${api}/agent/runs?limit=5`, { key }));
      });
    const manager = () =>
      loop(async () => {
        const description = `write-${n++}`;
        const a = await request('manage', `${api}/webhooks/${target.webhook.uid}`, {
          method: 'PATCH',
          key,
          body: { description },
        });
        answers.push(a);
        if (a.status >= 200 && a.status < 300) confirmed.push(description);
      });
    const load = [...Array.from({ length: 6 }, sender), runApi(), runApi(), manager()];

    const databaseName = new URL(database.url).pathname.slice(1);
    let terminated = 0;
    try {
      // Rounds of cuts at random points of the load: each after a random number of answers.
      for (let round = 0; round < 12; round++) {
        const before = answers.length;
        const gap = 5 + Math.floor(Math.random() * 40);
        await eventually(() => answers.length >= before + gap, 'the load to go on between cuts', {
          timeoutMs: 60_000,
        });
        terminated += await terminateBackends(databaseName);
        expect(serve.child.exitCode, serve.output()).toBeNull();
      }
    } finally {
      stop = true;
      await Promise.all(load);
    }

    expect(terminated).toBeGreaterThan(12);
    expect(serve.child.exitCode, serve.output()).toBeNull();
    expect(unexpectedAnswers(answers)).toEqual([]);
    expect(answers.filter((a) => a.what === 'ingress' && a.status === 202).length).toBeGreaterThan(20);

    // Every 202 has its delivery row.
    const check = new pg.Client({ connectionString: database.url });
    await check.connect();
    try {
      const { rows } = await check.query<{ identity: string }>(
        `SELECT d.identity FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
          WHERE w.uid = $1 AND d.status = 'accepted'`,
        [ingress.webhook.uid],
      );
      const stored = new Set(rows.map((r) => r.identity));
      expect(accepted.filter((id) => !stored.has(id))).toEqual([]);
    } finally {
      await check.end();
    }

    // It works again without a restart.
    await eventually(async () => (await request('readyz', `${url}/readyz`)).status === 200, 'ready again');
    const after = await request('ingress', `${url}/webhooks/w/${ingress.webhook.uid}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ingress.secret}`, 'x-service-delivery-id': 'after' },
      body: { after: true },
    });
    expect(after.status).toBe(202);
    expect(
      (await request('run', `${api}/agent/runs`, { method: 'POST', key, body: { prompt: 'y' } })).status,
    ).toBe(200);
    // The target shows the last write that was confirmed, not one whose caller got an error.
    await eventually(
      async () =>
        (await request('get', `${api}/webhooks/${target.webhook.uid}`, { key })).body?.description ===
        confirmed.at(-1),
      'the last confirmed write to be the live one',
    );
    const last = await request('manage', `${api}/webhooks/${target.webhook.uid}`, {
      method: 'PATCH',
      key,
      body: { description: 'after' },
    });
    expect(last.status).toBe(200);

    // The managed repository holds confirmed writes only: an interrupted one was reported or undone.
    const repo = join(dataDir, 'factories', 'teams', 'default', 'ops');
    const written = git(repo, 'log', '--format=%H', '--', 'webhooks/target.yaml')
      .trim()
      .split('\n')
      .map((c) => /description: (\S+)/.exec(git(repo, 'show', `${c}:webhooks/target.yaml`))?.[1])
      .filter((d): d is string => d !== undefined);
    expect(written.filter((d) => d !== 'after' && !confirmed.includes(d))).toEqual([]);
    expect(written[0]).toBe('after');
  }, 240_000);
});
