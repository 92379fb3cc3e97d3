import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import type { ConversationEvent } from './conversation-steps.js';
import type { ManagedFactory, SkillLoad } from './skill-usage.js';

/** Reads what workers recorded in run_events: conversations and skill loads. */
@Injectable()
export class ConversationsRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  async findRun(
    teamId: string,
    runId: string,
  ): Promise<{ id: string; conversation_id: string; session_id: string | null } | undefined> {
    const rows = await this.db.query<{ id: string; conversation_id: string; session_id: string | null }>(
      `SELECT id, conversation_id, session_id FROM runs WHERE id = $1 AND team_id = $2`,
      [runId, teamId],
    );
    return rows[0];
  }

  /** The run's recorded messages and actions, in order. */
  async conversation(runId: string): Promise<ConversationEvent[]> {
    return this.db.query<ConversationEvent>(
      // Ordered by the column (a bigint), not by the text of the same name the select list makes.
      `SELECT e.id::text AS id, e.type, e.role, e.kind, e.body, e.execution, e.created_at FROM run_events e
        WHERE e.run_id = $1 AND e.type IN ('message', 'action') ORDER BY e.id`,
      [runId],
    );
  }

  /** The run's transcript lines after event `afterId`, in order, at most `limit` (keyset pages). */
  async transcriptLines(
    runId: string,
    afterId: string,
    limit: number,
  ): Promise<Array<{ id: string; text: string }>> {
    return this.db.query<{ id: string; text: string }>(
      // Ordered by the column (a bigint), not by the text of the same name the select list makes.
      `SELECT e.id::text AS id, e.body->>'text' AS text FROM run_events e
        WHERE e.run_id = $1 AND e.type = 'transcript' AND e.id > $2::bigint ORDER BY e.id LIMIT $3`,
      [runId, afterId, limit],
    );
  }

  async skillLoads(teamId: string, since: Date | undefined): Promise<SkillLoad[]> {
    const rows = await this.db.query<{
      run_id: string;
      body: { input?: Record<string, unknown> };
      created_at: Date;
    }>(
      `SELECT run_id, body, created_at FROM run_events
        WHERE team_id = $1 AND type = 'action' AND kind = 'read_skill' AND ($2::timestamptz IS NULL OR created_at >= $2)
        ORDER BY id`,
      [teamId, since ?? null],
    );
    return rows.map((r) => ({ input: r.body.input ?? {}, runId: r.run_id, at: r.created_at }));
  }

  async managedFactories(teamId: string): Promise<ManagedFactory[]> {
    const rows = await this.db.query<{ name: string; repo_url: string }>(
      `SELECT name, repo_url FROM factories WHERE team_id = $1 ORDER BY name`,
      [teamId],
    );
    return rows.map((r) => ({ name: r.name, repoUrl: r.repo_url }));
  }
}
