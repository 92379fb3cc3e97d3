import { Inject, Injectable } from '@nestjs/common';
import { UUID_PATTERN } from '../common/ids.js';
import { NotFound } from '../common/problem.js';
import { AgentCatalogRepository } from './agent-catalog.repository.js';

/**
 * The clients' redirect checks, within the caller's team: a session whose run has ended redirects to
 * its conversation; a conversation whose newest run is live redirects to that run's session.
 */
@Injectable()
export class RedirectsService {
  constructor(@Inject(AgentCatalogRepository) private readonly catalog: AgentCatalogRepository) {}

  async session(
    teamId: string,
    sessionId: string,
  ): Promise<{ runId: string; body: { conversation_id?: string } }> {
    const rows = UUID_PATTERN.test(sessionId) ? await this.catalog.runOfSession(teamId, sessionId) : [];
    const run = rows[0];
    if (!run) throw new NotFound(`session ${sessionId} does not exist`);
    return { runId: run.id, body: run.ended ? { conversation_id: run.conversation_id } : {} };
  }

  async conversation(
    teamId: string,
    conversationId: string,
  ): Promise<{ runId: string; body: { session_id?: string } }> {
    const rows = UUID_PATTERN.test(conversationId)
      ? await this.catalog.newestRunOfConversation(teamId, conversationId)
      : [];
    const run = rows[0];
    if (!run) throw new NotFound(`conversation ${conversationId} does not exist`);
    return { runId: run.id, body: !run.ended && run.session_id ? { session_id: run.session_id } : {} };
  }
}
