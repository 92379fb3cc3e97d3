import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** Where PostgreSQL's Unix sockets usually are (Debian's, and the server's default). */
const SOCKET_DIRS = ['/var/run/postgresql', '/run/postgresql', '/tmp'];
const TIMEOUT_MS = 3000;

/**
 * The ways to DATABASE_URL's server that accept its user with no password at all (a `trust` line in
 * pg_hba.conf), as a process on this machine without the URL's password would try them: the URL's
 * TCP address and the usual socket folders. Whatever a harness reaches of these, it reaches as that
 * user (the start says so: docs/security.md, "A harness's network").
 */
export async function passwordlessWays(databaseUrl: string): Promise<string[]> {
  const u = new URL(databaseUrl);
  const user = decodeURIComponent(u.username) || 'postgres';
  const database = decodeURIComponent(u.pathname.slice(1)) || user;
  const port = Number(u.port || 5432);
  const socketDir =
    u.searchParams.get('host') ?? (/^%2f/i.test(u.hostname) ? decodeURIComponent(u.hostname) : '');
  const ways = [
    ...(u.hostname && !socketDir ? [{ host: u.hostname.replace(/^\[|\]$/g, ''), label: `${u.host}` }] : []),
    ...[socketDir, ...SOCKET_DIRS]
      .filter((dir) => dir && existsSync(join(dir, `.s.PGSQL.${port}`)))
      .map((dir) => ({ host: dir, label: realpathSync(join(dir, `.s.PGSQL.${port}`)) })),
  ];
  const open = await Promise.all(
    ways.map(async ({ host, label }) => {
      // A password that is always empty: not PGPASSWORD, not ~/.pgpass (a harness has neither).
      const client = new pg.Client({
        host,
        port,
        user,
        database,
        password: () => '',
        connectionTimeoutMillis: TIMEOUT_MS,
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        return label;
      } catch {
        return undefined;
      } finally {
        await client.end().catch(() => undefined);
      }
    }),
  );
  return [...new Set(open.filter((w): w is string => w !== undefined))];
}
