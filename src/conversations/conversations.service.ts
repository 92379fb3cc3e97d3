import { Inject, Injectable } from '@nestjs/common';
import { InvalidRequest, NotFound } from '../common/problem.js';
import { UUID_PATTERN } from '../common/ids.js';
import { conversationItems, conversationSteps } from './conversation-steps.js';
import { ConversationsRepository } from './conversations.repository.js';
import { skillUsage, type SkillUsageReport } from './skill-usage.js';

@Injectable()
export class ConversationsService {
  constructor(@Inject(ConversationsRepository) private readonly repo: ConversationsRepository) {}

  /**
   * A run's conversation: the prompt, follow-ups, the agent's messages and actions, in order; as the
   * Oz clients' `steps` and as factoryd's flat `messages`.
   */
  async conversation(teamId: string, runId: string) {
    const run = UUID_PATTERN.test(runId) ? await this.repo.findRun(teamId, runId) : undefined;
    if (!run) throw new NotFound(`run ${runId} does not exist`);
    const events = await this.repo.conversation(run.id);
    return {
      run_id: run.id,
      conversation_id: run.conversation_id,
      ...(run.session_id ? { session_id: run.session_id } : {}),
      steps: conversationSteps(run.id, events),
      messages: conversationItems(events),
    };
  }

  async skillUsage(teamId: string, since?: string): Promise<SkillUsageReport & { since?: string }> {
    let from: Date | undefined;
    if (since !== undefined) {
      from = new Date(since);
      if (!/^\d{4}-\d{2}-\d{2}/.test(since) || Number.isNaN(from.getTime()))
        throw new InvalidRequest(
          `since must be a date or an RFC 3339 timestamp (e.g. 2026-01-31), got "${since}"`,
        );
    }
    const report = skillUsage(
      await this.repo.skillLoads(teamId, from),
      await this.repo.managedFactories(teamId),
    );
    return from ? { since: from.toISOString(), ...report } : report;
  }
}
