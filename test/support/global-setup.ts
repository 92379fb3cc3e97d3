import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
// @ts-expect-error plain JS (npm start runs it before anything is built)
import { buildIfStale } from '../../bin/build-if-stale.js';
import { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';
import { browserMissing } from '../dashboard/browser-check.js';
import { asksPassword } from './password.js';
import { bwrapMissing, unconfinedHere } from './sandbox-check.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A server URL on which tests may create and drop their own databases. */
    adminDatabaseUrl: string;
  }
}

/**
 * One PostgreSQL for the whole run: DATABASE_URL when set, else a throwaway embedded server. Each
 * test file then creates its own database on it (test/support/database.ts).
 */
export default async function setup(project: TestProject) {
  announce();
  // Tests that spawn the `factoryd` binary run the built `dist/`. It is built here, once, before any
  // test file starts: a file that rebuilt it itself would rewrite `dist/` under the processes another
  // file is starting from it (half-written modules), and load both cores while others keep time.
  buildIfStale();
  if (process.env.DATABASE_URL) {
    project.provide('adminDatabaseUrl', process.env.DATABASE_URL);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-test-pg-'));
  chmodSync(dir, 0o755); // as root the server runs as `postgres`, which must reach it
  const server = new EmbeddedPostgres({ dir, durable: false });
  project.provide('adminDatabaseUrl', await server.start());
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}

/**
 * What the run does and what it leaves out, first: the first files take a minute to report, and a
 * skipped test shows only as a count.
 */
function announce(): void {
  const noBwrap = bwrapMissing();
  const unconfined = unconfinedHere();
  const lines = [
    `factoryd tests on ${process.env.DATABASE_URL ? 'DATABASE_URL' : 'a throwaway embedded PostgreSQL'}: ` +
      'two files at a time, each on its own database; a file is reported when it ends (the longest take about a minute).',
    process.env.TEST_REDIS_URL
      ? `TEST_REDIS_URL=${process.env.TEST_REDIS_URL}: the rate-limit tests also run on Redis.`
      : 'TEST_REDIS_URL unset: the rate-limit tests on Redis are skipped (set TEST_REDIS_URL=redis://127.0.0.1:6379 to run them).',
    browserMissing() ? `The dashboard's browser tests are skipped: ${browserMissing()}.` : '',
    noBwrap
      ? `The tests of the bwrap sandbox are skipped, each saying why: ${noBwrap} (Debian's package: bubblewrap).`
      : '',
    unconfined
      ? `Nothing confines harnesses here (${unconfined}): the service's own workers refuse to run harnesses ` +
        'once it holds two teams (docs/security.md, "none"), so the tests that have them do so are skipped, each saying why; install bubblewrap to run them.'
      : '',
    !process.env.DATABASE_URL || asksPassword(process.env.DATABASE_URL)
      ? 'One database-cuts test (a cut as a new connection is handed out) is skipped: it needs a server that trusts the connection, ' +
        'and this one asks for a password (set DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres, trust auth, to run it).'
      : '',
  ].filter(Boolean);
  process.stdout.write(`${lines.join('\n')}\n\n`);
}
