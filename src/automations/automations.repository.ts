import { Inject, Injectable } from '@nestjs/common';
import { Database, type Queryable } from '../database/database.js';

/** An applied agent, as the trigger index resolves an automation's agent config from it. */
export interface AgentRow {
  name: string;
  agent_type: string;
  overrides: Record<string, unknown>;
  base_prompt: string;
}

/** An enabled automation, as the trigger index compiles it. */
export interface AutomationRow {
  id: string;
  name: string;
  agent_name: string | null;
  triggers: unknown;
  overrides: Record<string, unknown>;
  prompt: string;
}

/** The applied definition state the trigger index reads (the reconciler alone writes it). */
@Injectable()
export class AutomationsRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** The factory's `agentDefaults` as last applied (empty when none, or no such factory). */
  async agentDefaults(factoryId: string, q: Queryable = this.db): Promise<Record<string, unknown>> {
    const [row] = await q.query<{ defaults: Record<string, unknown> | null }>(
      `SELECT definition->'agentDefaults' AS defaults FROM factories WHERE id = $1`,
      [factoryId],
    );
    return row?.defaults ?? {};
  }

  /** The factory's uid (stamped on the runs its automations start), or undefined when there is none. */
  async factoryUid(factoryId: string): Promise<string | undefined> {
    const [row] = await this.db.query<{ uid: string }>(`SELECT uid FROM factories WHERE id = $1`, [
      factoryId,
    ]);
    return row?.uid;
  }

  /** The factory's agents that are not deleted. */
  liveAgents(factoryId: string, q: Queryable = this.db): Promise<AgentRow[]> {
    return q.query<AgentRow>(
      `SELECT name, agent_type, overrides, base_prompt FROM agents WHERE factory_id = $1 AND deleted_at IS NULL`,
      [factoryId],
    );
  }

  /** The factory's enabled automations that are not deleted, by path. */
  enabledAutomations(factoryId: string): Promise<AutomationRow[]> {
    return this.db.query<AutomationRow>(
      `SELECT id, name, agent_name, triggers, overrides, prompt FROM automations
        WHERE factory_id = $1 AND enabled AND deleted_at IS NULL ORDER BY path`,
      [factoryId],
    );
  }

  /** Every automation of the factory that is not deleted, enabled or not, by path (schedules show both). */
  liveAutomations(
    factoryId: string,
    q: Queryable = this.db,
  ): Promise<Array<AutomationRow & { path: string; enabled: boolean }>> {
    return q.query(
      `SELECT id, name, path, enabled, agent_name, triggers, overrides, prompt FROM automations
        WHERE factory_id = $1 AND deleted_at IS NULL ORDER BY path`,
      [factoryId],
    );
  }
}
