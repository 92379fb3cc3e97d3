import { Inject, Injectable } from '@nestjs/common';
import { UUID_PATTERN } from '../common/ids.js';
import { NotFound } from '../common/problem.js';
import { Database } from '../database/database.js';

const ENDED = `('SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED')`;

/**
 * The clients' redirect checks, within the caller's team: a session whose run has ended redirects to
 * its conversation; a conversation whose newest run is live redirects to that run's session.
 */
@Injectable()
export class RedirectsService {
  constructor(@Inject(Database) private readonly db: Database) {}

  async session(
    teamId: string,
    sessionId: string,
  ): Promise<{ runId: string; body: { conversation_id?: string } }> {
    const rows = UUID_PATTERN.test(sessionId)
      ? await this.db.query<{ id: string; conversation_id: string; ended: boolean }>(
          `SELECT id, conversation_id, state IN ${ENDED} AS ended FROM runs WHERE session_id = $1 AND team_id = $2`,
          [sessionId, teamId],
        )
      : [];
    const run = rows[0];
    if (!run) throw new NotFound(`session ${sessionId} does not exist`);
    return { runId: run.id, body: run.ended ? { conversation_id: run.conversation_id } : {} };
  }

  async conversation(
    teamId: string,
    conversationId: string,
  ): Promise<{ runId: string; body: { session_id?: string } }> {
    const rows = UUID_PATTERN.test(conversationId)
      ? await this.db.query<{ id: string; session_id: string | null; ended: boolean }>(
          `SELECT id, session_id, state IN ${ENDED} AS ended FROM runs WHERE conversation_id = $1 AND team_id = $2
            ORDER BY created_at DESC, id DESC LIMIT 1`,
          [conversationId, teamId],
        )
      : [];
    const run = rows[0];
    if (!run) throw new NotFound(`conversation ${conversationId} does not exist`);
    return { runId: run.id, body: !run.ended && run.session_id ? { session_id: run.session_id } : {} };
  }
}
