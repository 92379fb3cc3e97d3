import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A factory's repository credentials live in a team secret (encrypted), named here; never in
 * `repo_url`. Rows that still carry them in the URL are moved by the reconciler (it holds the secrets
 * key, which SQL does not) before their next fetch: see repository-credentials.ts.
 */
export class RepositoryCredentials1763690320000 implements MigrationInterface {
  name = 'RepositoryCredentials1763690320000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE factories ADD COLUMN repo_credentials_secret text`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE factories DROP COLUMN repo_credentials_secret`);
  }
}
