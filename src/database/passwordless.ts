import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';

/** Where PostgreSQL's Unix sockets usually are (Debian's, and the server's default). */
const SOCKET_DIRS = ['/var/run/postgresql', '/run/postgresql', '/tmp'];
const TIMEOUT_MS = 3000;

/** The users a server accepts with no password, and through which ways. */
export interface PasswordlessUser {
  user: string;
  /** The TCP address (host:port) or the socket's path, as a process here would reach it. */
  ways: string[];
}

/**
 * Who DATABASE_URL's server accepts with no password at all (a `trust` line in pg_hba.conf), as a
 * process on this machine without the URL's password would try: the URL's own user and `postgres`,
 * the superuser every cluster has (a `trust` line for it alone is common: `local all postgres trust`),
 * each through the URL's TCP address and the usual socket folders. Whatever a harness reaches of
 * these, it reaches as that user (the start says so: docs/security.md, "A harness's network").
 */
export async function passwordlessUsers(databaseUrl: string): Promise<PasswordlessUser[]> {
  const u = new URL(databaseUrl);
  const own = decodeURIComponent(u.username) || 'postgres';
  const database = decodeURIComponent(u.pathname.slice(1)) || own;
  const port = Number(u.port || 5432);
  const socketDir =
    u.searchParams.get('host') ?? (/^%2f/i.test(u.hostname) ? decodeURIComponent(u.hostname) : '');
  const ways = [
    ...(u.hostname && !socketDir ? [{ host: u.hostname.replace(/^\[|\]$/g, ''), label: `${u.host}` }] : []),
    ...[socketDir, ...SOCKET_DIRS]
      .filter((dir) => dir && existsSync(join(dir, `.s.PGSQL.${port}`)))
      .map((dir) => ({ host: dir, label: realpathSync(join(dir, `.s.PGSQL.${port}`)) })),
  ];
  const users = [...new Set([own, 'postgres'])];
  const found = await Promise.all(
    users.map(async (user) => {
      const open = await Promise.all(
        ways.map(async ({ host, label }) =>
          // The URL's database, else `postgres` (there in every cluster): a trust line for the
          // superuser opens every database, whichever the URL names.
          (await accepts({ host, port, user, database })) ||
          (user === 'postgres' &&
            database !== 'postgres' &&
            (await accepts({ host, port, user, database: 'postgres' })))
            ? label
            : undefined,
        ),
      );
      return { user, ways: [...new Set(open.filter((w): w is string => w !== undefined))] };
    }),
  );
  return found.filter((f) => f.ways.length);
}

/** Whether the server lets `user` in with an empty password. */
async function accepts(options: {
  host: string;
  port: number;
  user: string;
  database: string;
}): Promise<boolean> {
  // A password that is always empty: not PGPASSWORD, not ~/.pgpass (a harness has neither).
  const client = new pg.Client({ ...options, password: () => '', connectionTimeoutMillis: TIMEOUT_MS });
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
