import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';

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
