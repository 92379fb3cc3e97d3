import { Inject, Injectable } from '@nestjs/common';
import { Database, type Queryable } from '../database/database.js';

export interface SecretListing {
  name: string;
  current_version: number;
  created_at: Date;
  updated_at: Date;
}

export interface SecretVersionRef {
  secretId: string;
  versionId: string;
  version: number;
}

@Injectable()
export class SecretsRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** Adds a version (creating the secret if new) and makes it current; returns the new version. */
  async addVersion(
    teamId: string,
    name: string,
    encrypt: (secretId: string) => Buffer,
  ): Promise<SecretVersionRef> {
    return this.db.transaction(async (tx) => {
      const [secret] = await tx.query<{ id: string; current_version: number }>(
        `INSERT INTO secrets (team_id, name, current_version) VALUES ($1, $2, 1)
         ON CONFLICT (team_id, name) DO UPDATE SET current_version = secrets.current_version + 1, updated_at = now()
         RETURNING id, current_version`,
        [teamId, name],
      );
      const [version] = await tx.query<{ id: string }>(
        `INSERT INTO secret_versions (secret_id, version, ciphertext) VALUES ($1, $2, $3) RETURNING id`,
        [secret.id, secret.current_version, encrypt(secret.id)],
      );
      return { secretId: secret.id, versionId: version.id, version: secret.current_version };
    });
  }

  /**
   * Withdraws `ref` if it is still its secret's current version: the version before it is current
   * again, and a secret whose only version it was is removed. A pinned version cannot be removed.
   */
  async removeVersion(ref: SecretVersionRef): Promise<void> {
    await this.db.transaction(async (tx) => {
      const [secret] = await tx.query<{ current_version: number }>(
        `SELECT current_version FROM secrets WHERE id = $1 FOR UPDATE`,
        [ref.secretId],
      );
      if (secret?.current_version !== ref.version) return;
      if (ref.version === 1) {
        await tx.execute(`DELETE FROM secrets WHERE id = $1`, [ref.secretId]);
        return;
      }
      await tx.execute(`DELETE FROM secret_versions WHERE id = $1`, [ref.versionId]);
      await tx.execute(
        `UPDATE secrets SET current_version = current_version - 1, updated_at = now() WHERE id = $1`,
        [ref.secretId],
      );
    });
  }

  async list(teamId: string): Promise<SecretListing[]> {
    return this.db.query<SecretListing>(
      `SELECT name, current_version, created_at, updated_at FROM secrets WHERE team_id = $1 ORDER BY name`,
      [teamId],
    );
  }

  /** The current version of a team secret, or undefined when no secret has that name. */
  async current(
    q: Queryable,
    teamId: string,
    name: string,
  ): Promise<(SecretVersionRef & { ciphertext: Buffer }) | undefined> {
    const rows = await q.query<{
      secret_id: string;
      version_id: string;
      version: number;
      ciphertext: Buffer;
    }>(
      `SELECT s.id AS secret_id, v.id AS version_id, v.version, v.ciphertext
         FROM secrets s JOIN secret_versions v ON v.secret_id = s.id AND v.version = s.current_version
        WHERE s.team_id = $1 AND s.name = $2`,
      [teamId, name],
    );
    const r = rows[0];
    return (
      r && { secretId: r.secret_id, versionId: r.version_id, version: r.version, ciphertext: r.ciphertext }
    );
  }

  async version(
    q: Queryable,
    versionId: string,
  ): Promise<{ secretId: string; ciphertext: Buffer } | undefined> {
    const rows = await q.query<{ secret_id: string; ciphertext: Buffer }>(
      `SELECT secret_id, ciphertext FROM secret_versions WHERE id = $1`,
      [versionId],
    );
    return rows[0] && { secretId: rows[0].secret_id, ciphertext: rows[0].ciphertext };
  }
}
