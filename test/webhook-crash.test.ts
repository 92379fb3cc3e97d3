import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NestFactory } from '@nestjs/core';
import { CommandsModule } from '../src/commands.module.js';
import { Database } from '../src/database/database.js';
import { loadConfig } from '../src/config/config.js';
import { createTestDatabase } from './support/database.js';
import { createFactory, createWebhook } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { startServeProcess } from './support/serve-process.js';
import type { TestService } from './support/service.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataDir: string;
let child: ChildProcess | undefined;
let pool: pg.Pool;

beforeAll(async () => {
  database = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'factoryd-crash-'));
}, 180_000);
afterAll(async () => {
  child?.kill('SIGKILL');
  await pool?.end();
  await database?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the server killed with SIGKILL under load', () => {
  it('every 202 it sent has its delivery row', async () => {
    const key = randomBytes(32);
    const served = await startServeProcess(
      {
        DATABASE_URL: database.url,
        DATA_DIR: dataDir,
        SECRETS_KEY: key.toString('base64'),
        WEBHOOK_RATE_LIMIT_PER_MINUTE: '1000000',
      },
      { cwd: dataDir },
    );
    child = served.child;
    const url = served.url;
    pool = new pg.Pool({ connectionString: database.url });
    const db = new Database(pool, undefined as never);
    // The factory is applied from this process, by the CLI's services on the server's database and key.
    const config = loadConfig({
      ...process.env,
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      SECRETS_KEY: key.toString('base64'),
      FACTORY_REPO_ROOTS: tmpdir(),
    });
    const services = await NestFactory.createApplicationContext(CommandsModule.forRoot(config, db), {
      logger: ['error'],
      abortOnError: false,
    });
    const [team] = await db.query<{ id: string }>(`SELECT id FROM teams WHERE name = 'default'`);
    const host = {
      service: { db, app: services },
      defaultTeam: { id: team!.id },
    } as unknown as TestService;
    const factory = await createFactory(host);
    const hook = await createWebhook(host, factory);
    await services.close();

    const acknowledged: string[] = [];
    let n = 0;
    let stop = false;
    let refused = 0;
    const sender = async () => {
      while (!stop) {
        const id = `crash-${n++}`;
        try {
          const res = await fetch(`${url}/webhooks/w/${hook.uid}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${hook.secret}`, 'x-service-delivery-id': id },
            body: JSON.stringify({ id }),
          });
          if (res.status === 202)
            acknowledged.push(((await res.json()) as { delivery_id: string }).delivery_id);
        } catch {
          refused++; // the server died mid-request: no 202, no promise made
        }
      }
    };
    const senders = Array.from({ length: 20 }, sender);
    // Killed under load: many deliveries acknowledged, more in flight.
    await eventually(() => acknowledged.length > 50, 'more than 50 acknowledged deliveries', {
      timeoutMs: 60_000,
    });
    child!.kill('SIGKILL');
    await eventually(() => refused >= 20, 'requests refused once the server is gone');
    stop = true;
    await Promise.all(senders);

    expect(acknowledged.length).toBeGreaterThan(50);
    const rows = await db.query<{ identity: string }>(
      `SELECT identity FROM deliveries WHERE webhook_id = $1 AND status = 'accepted'`,
      [hook.id],
    );
    const stored = new Set(rows.map((r) => r.identity));
    expect(acknowledged.filter((id) => !stored.has(id))).toEqual([]);
  }, 120_000);
});
