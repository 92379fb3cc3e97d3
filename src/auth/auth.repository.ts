import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import { newUid } from '../common/ids.js';
import type { Scope } from './api-key.js';
import type { Principal, TeamRef } from './auth-context.js';
import type { Provider, TeamBaseUrls } from '../harnesses/base-url.js';

export interface KeyRecord {
  keyId: string;
  scopes: Scope[];
  principal: Principal;
  teams: TeamRef[];
  workerHost: string | null;
}

export interface ApiKeyListing {
  id: string;
  name: string;
  prefix: string;
  scopes: Scope[];
  /** A worker key's host. */
  worker_host: string | null;
  principal_uid: string;
  teams: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

@Injectable()
export class AuthRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** The live key with this hash, its principal and the principal's teams. */
  async findKeyByHash(hash: Buffer): Promise<KeyRecord | undefined> {
    const rows = await this.db.query<{
      key_id: string;
      scopes: Scope[];
      worker_host: string | null;
      principal_id: string;
      principal_uid: string;
      type: Principal['type'];
      display_name: string;
      teams: TeamRef[];
    }>(
      `SELECT k.id AS key_id, k.scopes, k.worker_host, p.id AS principal_id, p.uid AS principal_uid, p.type, p.display_name,
              coalesce(json_agg(json_build_object('id', t.id, 'uid', t.uid, 'name', t.name) ORDER BY t.name)
                       FILTER (WHERE t.id IS NOT NULL), '[]') AS teams
         FROM api_keys k
         JOIN principals p ON p.id = k.principal_id
         LEFT JOIN team_members m ON m.principal_id = p.id
         LEFT JOIN teams t ON t.id = m.team_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL
        GROUP BY k.id, p.id`,
      [hash],
    );
    const r = rows[0];
    if (!r) return undefined;
    return {
      keyId: r.key_id,
      scopes: r.scopes,
      principal: { id: r.principal_id, uid: r.principal_uid, type: r.type, displayName: r.display_name },
      teams: r.teams,
      workerHost: r.worker_host,
    };
  }

  async touchKey(keyId: string): Promise<void> {
    await this.db.execute(`UPDATE api_keys SET last_used_at = now() WHERE id = $1`, [keyId]);
  }

  async findTeamByName(name: string): Promise<TeamRef | undefined> {
    const rows = await this.db.query<TeamRef>(`SELECT id, uid, name FROM teams WHERE name = $1`, [name]);
    return rows[0];
  }

  async findTeam(nameOrUid: string): Promise<TeamRef | undefined> {
    const rows = await this.db.query<TeamRef>(`SELECT id, uid, name FROM teams WHERE name = $1 OR uid = $1`, [
      nameOrUid,
    ]);
    return rows[0];
  }

  /** Creates the team; undefined when the name is taken. */
  async createTeam(name: string): Promise<TeamRef | undefined> {
    const rows = await this.db.query<TeamRef>(
      `INSERT INTO teams (uid, name) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING id, uid, name`,
      [newUid(), name],
    );
    return rows[0];
  }

  async listTeams(): Promise<
    Array<
      TeamRef & {
        created_at: Date;
        harness_command: string | null;
        harness_type: string | null;
        max_slots: number | null;
        harness_base_urls: TeamBaseUrls | null;
      }
    >
  > {
    return this.db.query(
      `SELECT id, uid, name, created_at, harness_command, harness_type, max_slots, harness_base_urls FROM teams ORDER BY name`,
    );
  }

  /**
   * The team's own base URL for one model provider's harnesses (docs/harnesses.md); null: the
   * operator's again. Returns the team's base URLs after the change.
   */
  async setHarnessBaseUrl(teamId: string, provider: Provider, url: string | null): Promise<TeamBaseUrls> {
    const rows = await this.db.query<{ urls: TeamBaseUrls | null }>(
      `UPDATE teams SET harness_base_urls = nullif(
         CASE WHEN $3::text IS NULL THEN coalesce(harness_base_urls, '{}'::jsonb) - $2::text
              ELSE coalesce(harness_base_urls, '{}'::jsonb) || jsonb_build_object($2::text, $3::text) END,
         '{}'::jsonb)
        WHERE id = $1 RETURNING harness_base_urls AS urls`,
      [teamId, provider, url],
    );
    return rows[0]?.urls ?? {};
  }

  /** The team's default harness type (docs/harnesses.md); null: `oz`, its harness command. */
  async setHarnessType(teamId: string, type: string | null): Promise<void> {
    await this.db.execute(`UPDATE teams SET harness_type = $2 WHERE id = $1`, [teamId, type]);
  }

  /** The team's harness for the service-hosted workers; null: the environment's HARNESS_COMMAND. */
  async setHarnessCommand(teamId: string, command: string | null): Promise<void> {
    await this.db.execute(`UPDATE teams SET harness_command = $2 WHERE id = $1`, [teamId, command]);
  }

  /** The most service-hosted slots the team's runs may hold at once; null: the environment's default. */
  async setMaxSlots(teamId: string, slots: number | null): Promise<void> {
    await this.db.execute(`UPDATE teams SET max_slots = $2 WHERE id = $1`, [teamId, slots]);
  }

  /** A principal in the given teams with one key; all in one transaction. */
  async createPrincipalWithKey(input: {
    type: Principal['type'];
    displayName: string;
    teamIds: string[];
    keyName: string;
    prefix: string;
    hash: Buffer;
    scopes: Scope[];
    workerHost?: string;
  }): Promise<{ keyId: string; principalUid: string }> {
    return this.db.transaction(async (tx) => {
      const [p] = await tx.query<{ id: string; uid: string }>(
        `INSERT INTO principals (uid, type, display_name) VALUES ($1, $2, $3) RETURNING id, uid`,
        [newUid(), input.type, input.displayName],
      );
      for (const teamId of input.teamIds) {
        await tx.execute(`INSERT INTO team_members (team_id, principal_id) VALUES ($1, $2)`, [teamId, p.id]);
      }
      const [k] = await tx.query<{ id: string }>(
        `INSERT INTO api_keys (principal_id, name, prefix, key_hash, scopes, worker_host) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
        [p.id, input.keyName, input.prefix, input.hash, input.scopes, input.workerHost ?? null],
      );
      return { keyId: k.id, principalUid: p.uid };
    });
  }

  async listKeys(teamId?: string): Promise<ApiKeyListing[]> {
    return this.db.query<ApiKeyListing>(
      `SELECT k.id, k.name, k.prefix, k.scopes, k.worker_host, p.uid AS principal_uid, k.created_at, k.last_used_at, k.revoked_at,
              coalesce(array_agg(t.name ORDER BY t.name) FILTER (WHERE t.id IS NOT NULL), '{}') AS teams
         FROM api_keys k
         JOIN principals p ON p.id = k.principal_id
         LEFT JOIN team_members m ON m.principal_id = p.id
         LEFT JOIN teams t ON t.id = m.team_id
        WHERE $1::uuid IS NULL OR EXISTS (SELECT 1 FROM team_members x WHERE x.principal_id = p.id AND x.team_id = $1)
        GROUP BY k.id, p.uid
        ORDER BY k.created_at`,
      [teamId ?? null],
    );
  }

  /** True when a live key was revoked. */
  async revokeKey(id: string): Promise<boolean> {
    const revoked = await this.db.execute(
      `UPDATE api_keys SET revoked_at = now() WHERE id::text = $1 AND revoked_at IS NULL`,
      [id],
    );
    return revoked > 0;
  }

  /** Members of a team whose principal uid or display name is `who`; at most two (enough to tell "several"). */
  async membersNamed(teamId: string, who: string): Promise<Array<{ id: string }>> {
    return this.db.query<{ id: string }>(
      `SELECT p.id FROM principals p JOIN team_members m ON m.principal_id = p.id
        WHERE m.team_id = $1 AND (p.uid = $2 OR p.display_name = $2) LIMIT 2`,
      [teamId, who],
    );
  }
}
