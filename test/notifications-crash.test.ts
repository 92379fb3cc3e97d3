import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './support/database.js';
import { eventually } from './support/eventually.js';
import { NotificationReceiver } from './support/notification-receiver.js';
import { startServeProcess } from './support/serve-process.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataDir: string;
let pool: pg.Pool;
const children: ChildProcess[] = [];
const receiver = new NotificationReceiver();

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'factoryd-notify-crash-'));
  pool = new pg.Pool({ connectionString: database.url });
}, 180_000);
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await receiver.stop();
  await pool?.end();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const env = () => ({
  DATABASE_URL: database.url,
  DATA_DIR: dataDir,
  WORKER_CONCURRENCY: '0',
  NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true',
  NOTIFICATIONS_TIMEOUT_MS: '300',
});

describe('factoryd serve killed with SIGKILL between state changes and their notifications', () => {
  it('sends them once it is back: the message committed with the state change', async () => {
    const serve = await startServeProcess(env());
    children.push(serve.child);
    const api = (path: string, method = 'GET', body?: unknown) =>
      fetch(`${serve.url}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${serve.adminKey}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

    // The receiver takes the first attempt and never answers: the process dies with it in flight.
    receiver.behaviour = (n) => (n === 1 ? 'hang' : 200);
    const url = await receiver.start();
    const created = await api('/notifications/endpoints', 'POST', { name: 'crash', url });
    expect(created.status).toBe(201);
    receiver.secret = created.body.secret;
    const run = await api('/agent/runs', 'POST', { prompt: 'Notify me across a crash' });
    expect(run.status).toBe(200);
    const runId = run.body.run_id as string;
    await eventually(() => receiver.ofRun(runId).length === 1, 'the first attempt in flight');
    serve.child.kill('SIGKILL');
    await eventually(() => serve.child.signalCode === 'SIGKILL', 'serve gone');

    // A state change that commits while no dispatcher runs (as if the process died right after its
    // commit): its message is there, pending, written by the same statement.
    await pool.query(`UPDATE runs SET state = 'CANCELLED', updated_at = now() WHERE id = $1`, [runId]);
    const { rows } = await pool.query(
      `SELECT status FROM notification_messages WHERE run_id = $1 AND type = 'run.cancelled'`,
      [runId],
    );
    expect(rows.map((r) => r.status)).toEqual(['pending']);

    // A later start on the same database and DATA_DIR.
    children.push((await startServeProcess(env())).child);
    const got = await eventually(
      () => {
        const r = receiver.ofRun(runId);
        return r.some((x) => x.body.type === 'run.cancelled') ? r : undefined;
      },
      'run.cancelled sent after the restart',
      { timeoutMs: 60_000 },
    );
    expect(got.every((r) => r.verified)).toBe(true);
    // The in-flight run.queued went again (same webhook-id: at-least-once), before run.cancelled.
    expect(got.map((r) => r.body.type)).toEqual(['run.queued', 'run.queued', 'run.cancelled']);
    expect(got[0]!.id).toBe(got[1]!.id);
  }, 120_000);
});
