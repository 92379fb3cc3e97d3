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

  /**
   * The same check for a caller without a key, as the clients make it: the session id (a random UUID
   * only its run's readers have seen, in its `session_id` and `session_link`) is the credential. Once
   * the run has ended it names the conversation, which a key of another team still cannot read; an
   * unknown or live session is `{}` alike, so the answer tells nothing more.
   */
  async sessionWithoutKey(sessionId: string): Promise<{ conversation_id?: string }> {
    const [run] = UUID_PATTERN.test(sessionId) ? await this.catalog.runOfSession(null, sessionId) : [];
    return run?.ended ? { conversation_id: run.conversation_id } : {};
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
