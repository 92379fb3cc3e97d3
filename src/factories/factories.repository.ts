import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import {
  FACTORY_COLUMNS,
  toFactory,
  type FactoryRecord,
  type FactoryRow,
} from '../reconciler/definition-store.js';

export interface WebhookRow {
  uid: string;
  name: string;
  auth_mode: string;
  signature_scheme: string | null;
  secret_name: string;
  delivery_id_header: string | null;
  enabled: boolean;
  deleted: boolean;
  created_at: Date;
}

export interface ApplyRow {
  id: string;
  revision: string | null;
  result: string;
  reason: string | null;
  errors: unknown[];
  plan: unknown;
  started_at: Date;
  duration_ms: number;
}

export interface AgentRow {
  name: string;
  overrides: Record<string, unknown>;
  base_prompt: string;
}

/** What a factory's applied definition holds, for its page in the dashboard (live rows only). */
export interface DefinitionRows {
  agents: Array<{ name: string; path: string; agent_type: string; description: string | null }>;
  automations: Array<{
    name: string;
    path: string;
    enabled: boolean;
    agent_name: string | null;
    triggers: Array<{
      provider: string;
      event: string;
      filter?: { webhook_ids?: string[]; payload?: unknown };
    }>;
  }>;
  skills: Array<{ name: string; path: string; description: string | null }>;
  /** Every webhook the factory ever had (deleted ones too), to name a trigger's UIDs. */
  webhookNames: Array<{ uid: string; name: string; deleted: boolean }>;
}

/** Reads of the applied factory state for the factory API (writes belong to the reconciler). */
@Injectable()
export class FactoriesRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** A page of the team's factories by name, after the (name, id) position `after`. */
  async list(
    teamId: string,
    search: string | undefined,
    after: { name: string; id: string } | undefined,
    limit: number,
  ): Promise<FactoryRecord[]> {
    const rows = await this.db.query<FactoryRow>(
      `SELECT ${FACTORY_COLUMNS} FROM factories f JOIN teams t ON t.id = f.team_id
        WHERE f.team_id = $1
          AND ($2::text IS NULL OR f.name ILIKE '%' || $2 || '%' OR coalesce(f.description, '') ILIKE '%' || $2 || '%')
          AND ($3::text IS NULL OR (f.name, f.id::text) > ($3, $4))
        ORDER BY f.name, f.id::text LIMIT $5`,
      [
        teamId,
        search ? search.replace(/[\\%_]/g, (c) => `\\${c}`) : null,
        after?.name ?? null,
        after?.id ?? null,
        limit,
      ],
    );
    return rows.map(toFactory);
  }

  async findByUid(teamId: string, uid: string): Promise<FactoryRecord | undefined> {
    const rows = await this.db.query<FactoryRow>(
      `SELECT ${FACTORY_COLUMNS} FROM factories f JOIN teams t ON t.id = f.team_id WHERE f.team_id = $1 AND f.uid = $2`,
      [teamId, uid],
    );
    return rows[0] ? toFactory(rows[0]) : undefined;
  }

  async webhooks(factoryId: string, includeDeleted: boolean): Promise<WebhookRow[]> {
    return this.db.query<WebhookRow>(
      `SELECT uid, name, auth_mode, signature_scheme, secret_name, delivery_id_header, enabled,
              deleted_at IS NOT NULL AS deleted, created_at
         FROM webhooks WHERE factory_id = $1 AND ($2 OR deleted_at IS NULL)
        ORDER BY name, created_at`,
      [factoryId, includeDeleted],
    );
  }

  /** Newest first, after the (started_at, id) position `after`. */
  async applies(
    factoryId: string,
    after: { startedAt: string; id: string } | undefined,
    limit: number,
  ): Promise<ApplyRow[]> {
    return this.db.query<ApplyRow>(
      `SELECT id, revision, result, reason, errors, plan, started_at, duration_ms FROM factory_applies
        WHERE factory_id = $1 AND ($2::timestamptz IS NULL OR (started_at, id) < ($2::timestamptz, $3::uuid))
        ORDER BY started_at DESC, id DESC LIMIT $4`,
      [factoryId, after?.startedAt ?? null, after?.id ?? null, limit],
    );
  }

  async definition(factoryId: string): Promise<DefinitionRows> {
    const [agents, automations, skills, webhookNames] = await Promise.all([
      this.db.query<DefinitionRows['agents'][number]>(
        `SELECT name, path, agent_type, description FROM agents
          WHERE factory_id = $1 AND deleted_at IS NULL ORDER BY agent_type DESC, name`,
        [factoryId],
      ),
      this.db.query<DefinitionRows['automations'][number]>(
        `SELECT name, path, enabled, agent_name, triggers FROM automations
          WHERE factory_id = $1 AND deleted_at IS NULL ORDER BY name`,
        [factoryId],
      ),
      this.db.query<DefinitionRows['skills'][number]>(
        `SELECT name, path, description FROM factory_skills
          WHERE factory_id = $1 AND deleted_at IS NULL ORDER BY name`,
        [factoryId],
      ),
      this.db.query<DefinitionRows['webhookNames'][number]>(
        `SELECT uid, name, deleted_at IS NOT NULL AS deleted FROM webhooks WHERE factory_id = $1`,
        [factoryId],
      ),
    ]);
    return { agents, automations, skills, webhookNames };
  }

  async foreman(factoryId: string): Promise<AgentRow | undefined> {
    const rows = await this.db.query<AgentRow>(
      `SELECT name, overrides, base_prompt FROM agents
        WHERE factory_id = $1 AND agent_type = 'FOREMAN' AND deleted_at IS NULL`,
      [factoryId],
    );
    return rows[0];
  }
}
