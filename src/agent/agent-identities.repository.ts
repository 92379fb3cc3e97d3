import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';

/** What a named agent created over the API keeps, as the clients name it (MCP servers sealed apart). */
export type IdentityDefaults = Record<string, unknown>;

export interface StoredIdentity {
  uid: string;
  name: string;
  defaults: IdentityDefaults;
  mcpSealed: Buffer | null;
  createdAt: Date;
  updatedAt: Date;
}

/** A factory's agent (agents/<name>/agent.md), read as the reconciler applied it. */
export interface FactoryAgentRow {
  id: string;
  name: string;
  agent_type: 'FOREMAN' | 'CUSTOM';
  description: string | null;
  overrides: Record<string, unknown>;
  base_prompt: string;
  created_at: Date;
  updated_at: Date;
  factory_uid: string;
  agent_defaults: Record<string, unknown> | null;
}

/** The columns of agent_identities that StoredIdentity holds. */
interface IdentityRow {
  uid: string;
  name: string;
  defaults: IdentityDefaults;
  mcp_sealed: Buffer | null;
  created_at: Date;
  updated_at: Date;
}

const toIdentity = (r: IdentityRow): StoredIdentity => ({
  uid: r.uid,
  name: r.name,
  defaults: r.defaults,
  mcpSealed: r.mcp_sealed,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const FACTORY_AGENTS = `SELECT a.id, a.name, a.agent_type, a.description, a.overrides, a.base_prompt, a.created_at,
       a.updated_at, f.uid AS factory_uid, f.definition->'agentDefaults' AS agent_defaults
  FROM agents a JOIN factories f ON f.id = a.factory_id
 WHERE f.team_id = $1 AND a.deleted_at IS NULL`;

/** Named agents: the team's own (agent_identities) and its factories' agents (read only). */
@Injectable()
export class AgentIdentitiesRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  async insert(teamId: string, i: StoredIdentity): Promise<void> {
    await this.db.execute(
      `INSERT INTO agent_identities (uid, team_id, name, defaults, mcp_sealed, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $6)`,
      [i.uid, teamId, i.name, JSON.stringify(i.defaults), i.mcpSealed, i.createdAt],
    );
  }

  async update(teamId: string, i: StoredIdentity): Promise<void> {
    await this.db.execute(
      `UPDATE agent_identities SET name = $3, defaults = $4, mcp_sealed = $5, updated_at = $6
        WHERE uid = $1 AND team_id = $2`,
      [i.uid, teamId, i.name, JSON.stringify(i.defaults), i.mcpSealed, i.updatedAt],
    );
  }

  async delete(teamId: string, uid: string): Promise<boolean> {
    return (
      (await this.db.execute(`DELETE FROM agent_identities WHERE uid = $1 AND team_id = $2`, [uid, teamId])) >
      0
    );
  }

  async find(teamId: string, uid: string): Promise<StoredIdentity | undefined> {
    const rows = await this.db.query<IdentityRow>(
      `SELECT * FROM agent_identities WHERE uid = $1 AND team_id = $2`,
      [uid, teamId],
    );
    return rows[0] ? toIdentity(rows[0]) : undefined;
  }

  async list(teamId: string, factoryUid?: string): Promise<StoredIdentity[]> {
    const rows = await this.db.query<IdentityRow>(
      `SELECT * FROM agent_identities WHERE team_id = $1 AND ($2::text IS NULL OR defaults->>'factory_uid' = $2)
        ORDER BY name, uid`,
      [teamId, factoryUid ?? null],
    );
    return rows.map(toIdentity);
  }

  async factoryAgent(teamId: string, id: string): Promise<FactoryAgentRow | undefined> {
    const rows = await this.db.query<FactoryAgentRow>(`${FACTORY_AGENTS} AND a.id = $2`, [teamId, id]);
    return rows[0];
  }

  async factoryAgents(teamId: string, factoryUid?: string): Promise<FactoryAgentRow[]> {
    return this.db.query<FactoryAgentRow>(
      `${FACTORY_AGENTS} AND ($2::text IS NULL OR f.uid = $2) ORDER BY a.name, a.id`,
      [teamId, factoryUid ?? null],
    );
  }

  /** Whether the team has a factory of this uid. */
  async factoryExists(teamId: string, uid: string): Promise<boolean> {
    const rows = await this.db.query(`SELECT 1 FROM factories WHERE uid = $1 AND team_id = $2`, [
      uid,
      teamId,
    ]);
    return rows.length > 0;
  }
}
