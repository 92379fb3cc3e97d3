import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A team's own base URL per model provider (`teams set-base-url`, docs/harnesses.md): a JSON object
 * `{"anthropic": URL, "openai": URL, "gemini": URL}`; NULL or a missing key: the operator's.
 */
export class TeamHarnessBaseUrls1763690530000 implements MigrationInterface {
  name = 'TeamHarnessBaseUrls1763690530000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams ADD COLUMN harness_base_urls jsonb`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(`ALTER TABLE teams DROP COLUMN harness_base_urls`);
  }
}
