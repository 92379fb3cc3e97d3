import { Inject, Injectable } from '@nestjs/common';
import { InvalidRequest } from '../common/problem.js';
import { Database, type Queryable } from '../database/database.js';
import { SecretCipher } from './secret-cipher.js';
import { generateSecret, type SecretKind } from './secret-generator.js';
import { SecretsRepository, type SecretListing, type SecretVersionRef } from './secrets.repository.js';

const SECRET_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Team secrets: set (a new version), list (never values), and resolve a pinned version's value. */
@Injectable()
export class SecretsService {
  constructor(
    @Inject(SecretsRepository) private readonly repo: SecretsRepository,
    @Inject(SecretCipher) private readonly cipher: SecretCipher,
    @Inject(Database) private readonly db: Database,
  ) {}

  async set(teamId: string, name: string, value: string): Promise<SecretVersionRef> {
    if (!SECRET_NAME.test(name))
      throw new InvalidRequest('secret name must be 1-128 characters of A-Z a-z 0-9 _ . -');
    if (value.length === 0) throw new InvalidRequest('a secret value may not be empty');
    return this.repo.addVersion(teamId, name, (secretId) => this.cipher.encrypt(value, secretId));
  }

  /** Generates a value, stores it as the secret's new version, and returns it (to be shown once). */
  async generate(
    teamId: string,
    name: string,
    kind: SecretKind,
  ): Promise<{ value: string; ref: SecretVersionRef }> {
    const value = generateSecret(kind);
    return { value, ref: await this.set(teamId, name, value) };
  }

  /** Undoes `set`/`generate` of `ref` (a change that then failed to apply), if nothing newer was set since. */
  revert(ref: SecretVersionRef): Promise<void> {
    return this.repo.removeVersion(ref);
  }

  list(teamId: string): Promise<SecretListing[]> {
    return this.repo.list(teamId);
  }

  /** The current version (with its value) of a team secret, or undefined if there is none. */
  async current(
    teamId: string,
    name: string,
    q: Queryable = this.db,
  ): Promise<(SecretVersionRef & { value: string }) | undefined> {
    const row = await this.repo.current(q, teamId, name);
    return (
      row && {
        secretId: row.secretId,
        versionId: row.versionId,
        version: row.version,
        value: this.cipher.decrypt(row.ciphertext, row.secretId),
      }
    );
  }

  /** The value of a pinned version. */
  async valueOf(versionId: string, q: Queryable = this.db): Promise<string | undefined> {
    const row = await this.repo.version(q, versionId);
    return row && this.cipher.decrypt(row.ciphertext, row.secretId);
  }
}
