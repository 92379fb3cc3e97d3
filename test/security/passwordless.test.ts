import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { passwordlessUsers } from '../../src/database/passwordless.js';
import { passwordlessWarning } from '../../src/workers/worker/service-workers.js';
import { loadConfig } from '../../src/config/config.js';

/**
 * Issue #32, 1: the start says when the database takes a user with no password from this machine.
 * A `trust` line for the superuser alone (`local all postgres trust`) is the case the issue names: a
 * harness that reaches the server does not need DATABASE_URL's user, it asks for `postgres`.
 */
describe('a database reachable without a password (docs/security.md, "A passwordless database")', () => {
  const admin = new URL(inject('adminDatabaseUrl'));

  /** Whether this server lets the superuser in through the test's address with an empty password. */
  async function trustsPostgres(): Promise<boolean> {
    const client = new pg.Client({
      host: admin.hostname,
      port: Number(admin.port || 5432),
      user: 'postgres',
      database: 'postgres',
      password: () => '',
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  it('finds the superuser postgres when DATABASE_URL names a user the server does not take without its password', async (ctx) => {
    if (!(await trustsPostgres())) ctx.skip('this server does not trust postgres from this machine');
    // A user with a password that no trust line lets in (it does not even exist): before, only this
    // user was tried, so nothing was said although the superuser was one connection away.
    const url = new URL(admin);
    url.username = `factoryd_nobody_${randomBytes(4).toString('hex')}`;
    url.password = 'not-the-password';
    const found = await passwordlessUsers(url.toString());
    expect(found.map((f) => f.user)).toEqual(['postgres']);
    expect(found[0]!.ways).toContain(`${admin.hostname}:${admin.port || 5432}`);

    const said = passwordlessWarning(found, 'bwrap', loadConfig({}));
    expect(said).toMatch(
      /^DATABASE_URL: the server accepts user postgres with no password through \S+( and \S+)* \(postgres is the superuser\)/,
    );
  });

  it("names each user once, the URL's own first, when both are taken", async (ctx) => {
    if (!(await trustsPostgres())) ctx.skip('this server does not trust postgres from this machine');
    const names = (await passwordlessUsers(admin.toString())).map((f) => f.user);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toContain('postgres');
    if (names.length === 2) expect(names[0]).toBe(decodeURIComponent(admin.username));
  });
});

describe('what the passwordless warning says harnesses reach, per sandbox and Docker network', () => {
  const users = [
    { user: 'factoryd', ways: ['127.0.0.1:5432'] },
    { user: 'postgres', ways: ['/run/postgresql/.s.PGSQL.5432'] },
  ];
  const config = (env: Record<string, string>) =>
    loadConfig({ DATABASE_URL: 'postgres://factoryd@127.0.0.1:5432/factoryd', ...env });

  it('says every harness can connect in none mode, none can in a namespace or on the none network', () => {
    expect(passwordlessWarning(users, 'none', config({}))).toContain('every harness can connect');
    expect(passwordlessWarning(users, 'bwrap', config({}))).toContain(
      'harnesses cannot reach it (sandbox bwrap',
    );
    expect(passwordlessWarning(users, 'docker', config({}))).toContain(
      'harnesses cannot reach it (each container on Docker’s none network',
    );
  });

  it("does not say harnesses cannot reach it when containers are on Docker's bridge", () => {
    const bridge = passwordlessWarning(users, 'docker', config({ WORKER_DOCKER_NETWORK: 'bridge' }));
    expect(bridge).not.toContain('cannot reach');
    expect(bridge).toContain('every container is on Docker’s bridge (WORKER_DOCKER_NETWORK=bridge)');
    expect(bridge).toContain('wherever the server listens beyond loopback');

    const some = passwordlessWarning(
      users,
      'docker',
      config({ WORKER_DOCKER_BRIDGE_ENVIRONMENTS: 'acme:build' }),
    );
    expect(some).not.toContain('cannot reach');
    expect(some).toContain('the containers of acme:build are on Docker’s bridge');

    // A server on an address the bridge routes to: they connect through it.
    const routed = passwordlessWarning(
      users,
      'docker',
      loadConfig({ DATABASE_URL: 'postgres://factoryd@10.1.2.3/x', WORKER_DOCKER_NETWORK: 'bridge' }),
    );
    expect(routed).toContain('so they can connect as that user through 10.1.2.3');
  });
});
