import type { MigrationInterface, QueryRunner } from 'typeorm';
import { loadConfig } from '../../config/config.js';
import { McpCredentials } from '../../secrets/mcp-credentials.js';
import { SecretCipher } from '../../secrets/secret-cipher.js';
import { loadSecretsKey } from '../../secrets/secrets-key.js';

/**
 * Seals the MCP credentials (`headers`, `env` values) that runs stored in plain text before they were
 * sealed on the way in (docs/security.md, "MCP server credentials"). The key is the service's own
 * (SECRETS_KEY, or the one under DATA_DIR), read from the same environment as the service, and only
 * when a row needs it: a fresh database never touches it.
 */
export class SealMcpCredentials1763684400000 implements MigrationInterface {
  name = 'SealMcpCredentials1763684400000';

  async up(db: QueryRunner): Promise<void> {
    await this.rewrite(db, (credentials, config, id) =>
      McpCredentials.hasPlaintext(config) ? credentials().seal(config, id) : undefined,
    );
  }

  async down(db: QueryRunner): Promise<void> {
    await this.rewrite(db, (credentials, config, id) => credentials().open(config, id));
  }

  private async rewrite(
    db: QueryRunner,
    change: (
      credentials: () => McpCredentials,
      config: Record<string, unknown>,
      id: string,
    ) => object | undefined,
  ): Promise<void> {
    const rows = (await db.query(
      `SELECT id, agent_config FROM runs WHERE agent_config ? 'mcp_servers'`,
    )) as Array<{ id: string; agent_config: Record<string, unknown> }>;
    let loaded: McpCredentials | undefined;
    const credentials = () => (loaded ??= new McpCredentials(new SecretCipher(loadSecretsKey(loadConfig()))));
    for (const row of rows) {
      const changed = change(credentials, row.agent_config, row.id);
      if (changed) await db.query(`UPDATE runs SET agent_config = $2 WHERE id = $1`, [row.id, changed]);
    }
  }
}
