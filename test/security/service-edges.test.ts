import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { createTestDatabase } from '../support/database.js';
import { eventually } from '../support/eventually.js';
import { startServeProcess, type ServeProcess } from '../support/serve-process.js';

/**
 * Issue #32, 8: the edges of `factoryd serve` a caller or a broken network reaches — a database that
 * accepts and never answers, a credential in a query string, links built from a Host header.
 */
describe('factoryd serve at its edges (docs/operations.md, docs/security.md)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-edges-'));
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let serve: ServeProcess | undefined;
  let url = '';
  let key = '';

  beforeAll(async () => {
    database = await createTestDatabase();
    serve = await startServeProcess({
      LOG_LEVEL: 'debug', // request lines are at debug
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      WORKER_CONCURRENCY: '0',
    });
    ({ url, adminKey: key } = serve);
  }, 180_000);
  afterAll(async () => {
    await serve?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('logs a query string by its parameter names: a key sent as ?api_key= never reaches the log', async () => {
    const leaked = `fdk_${'x'.repeat(24)}`;
    const res = await fetch(`${url}/api/v1/agent/runs?api_key=${leaked}&limit=1`, {
      headers: { authorization: `Bearer ${key}` },
    });
    await res.arrayBuffer();
    const line = await eventually(
      () =>
        serve!
          .output()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l))
          .find((l) => l.req?.url === '/api/v1/agent/runs'),
      'the request line',
    );
    expect(line.req.query).toEqual(['api_key', 'limit']);
    expect(serve!.output()).not.toContain(leaked);
  });

  it('builds links from the listening address, not from a Host header the caller chose', async () => {
    // node:http sends the Host header it is given (fetch would put the URL's own host back).
    const { host, body } = await new Promise<{ host: string; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${url}/api/v1/factory-files/schemas`,
        { headers: { host: 'evil.example' } },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ host: String(req.getHeader('host')), body: text }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(host).toBe('evil.example'); // what went on the wire
    const { schemas } = JSON.parse(body) as { schemas: Array<{ url: string }> };
    expect(schemas.length).toBeGreaterThan(0);
    for (const s of schemas) expect(s.url.startsWith(`${url}/api/v1/factory-files/schemas/`)).toBe(true);
    expect(body).not.toContain('evil.example');
  });

  it('refuses at save time a notification URL whose IPv6 literal carries a private IPv4 address', async () => {
    for (const host of ['[::7f00:1]', '[::ffff:0:a9fe:a9fe]', '[2002:7f00:1::]', '[64:ff9b::a00:1]']) {
      const res = await fetch(`${url}/api/v1/notifications/endpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'probe', url: `https://${host}/hook` }),
      });
      const body = (await res.json()) as { detail?: string };
      expect(res.status, host).toBe(400);
      expect(body.detail, host).toMatch(/url points at a private, loopback or reserved address/);
    }
  });

  it('caps the notification endpoints a team makes through the API at 100, with a 409 that says so', async () => {
    const create = (name: string) =>
      fetch(`${url}/api/v1/notifications/endpoints`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name, url: 'https://hooks.example.com/x' }),
      });
    for (let i = 0; i < 100; i++) expect((await create(`e${i}`)).status).toBe(201);
    const over = await create('one-too-many');
    expect(over.status).toBe(409);
    expect(((await over.json()) as { detail: string }).detail).toBe(
      'this team already has 100 notification endpoints, the most it may have: delete one first',
    );
  });

  it('stops within the connect limit, naming the host and not the password, when the database never answers', async () => {
    const held: Socket[] = [];
    const silent = createServer((s) => held.push(s)); // accepts, reads, never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const started = Date.now();
    try {
      const r = await runCli(['serve'], {
        env: {
          DATABASE_URL: `postgres://factoryd:hunter2-secret@127.0.0.1:${port}/factoryd`,
          DATA_DIR: dataDir,
          PORT: '0',
          LOG_LEVEL: 'silent',
        },
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`cannot connect to PostgreSQL at 127.0.0.1:${port}/factoryd (DATABASE_URL)`);
      expect(r.stderr).not.toContain('hunter2-secret');
      expect(Date.now() - started).toBeLessThan(60_000);
      expect(held.length).toBeGreaterThan(0); // it did reach the silent server
    } finally {
      for (const s of held) s.destroy();
      silent.close();
    }
  }, 90_000);
});
