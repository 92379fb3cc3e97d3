import { Inject, Injectable } from '@nestjs/common';
import { compilePayloadFilter, type PayloadPredicate } from './payload-filter.js';
import type { AgentOverrides } from '../definitions/definition.js';
import { resolveAgentConfig } from '../definitions/agent-config.js';
import { AutomationsRepository } from './automations.repository.js';
import type { AutomationTarget } from './run-envelope.js';

/** An automation that a webhook's delivery may start, with its payload filters compiled. */
export interface Trigger extends AutomationTarget {
  /** True when any of the automation's triggers on this webhook accepts the body. */
  matches: PayloadPredicate;
}

interface WebhookTriggerSpec {
  provider?: unknown;
  event?: unknown;
  filter?: { webhook_ids?: unknown; payload?: Record<string, unknown> | null };
}

/** An automation's triggers that fire on webhook deliveries: the UIDs each selects, and its payload filter. */
export function webhookTriggers(
  triggers: unknown,
): Array<{ webhookIds: string[]; payload?: Record<string, unknown> | null }> {
  const out: Array<{ webhookIds: string[]; payload?: Record<string, unknown> | null }> = [];
  for (const t of (Array.isArray(triggers) ? triggers : []) as WebhookTriggerSpec[]) {
    if (t.provider !== 'webhook' || (t.event !== undefined && t.event !== 'received')) continue;
    const ids = Array.isArray(t.filter?.webhook_ids) ? (t.filter.webhook_ids as unknown[]) : [];
    out.push({
      webhookIds: ids.filter((x): x is string => typeof x === 'string'),
      payload: t.filter?.payload,
    });
  }
  return out;
}

/**
 * Builds, per applied factory, the triggers of each webhook UID from the enabled automations:
 * loaded and compiled once per apply (the caller refreshes it when an apply is announced).
 */
@Injectable()
export class TriggerIndex {
  constructor(@Inject(AutomationsRepository) private readonly repo: AutomationsRepository) {}

  async load(factoryId: string): Promise<Map<string, Trigger[]>> {
    const [agentDefaults, agents, automations] = await Promise.all([
      this.repo.agentDefaults(factoryId),
      this.repo.liveAgents(factoryId),
      this.repo.enabledAutomations(factoryId),
    ]);
    const index = new Map<string, Trigger[]>();
    for (const a of automations) {
      const agentRow = a.agent_name
        ? agents.find((g) => g.name === a.agent_name)
        : agents.find((g) => g.agent_type === 'FOREMAN');
      // Validation guarantees the agent at apply; should it be gone, the run still gets the defaults.
      const agent = {
        name: agentRow?.name ?? a.name,
        basePrompt: agentRow?.base_prompt ?? '',
        overrides: (agentRow?.overrides ?? {}) as AgentOverrides,
      };
      const config = resolveAgentConfig(
        agentDefaults as AgentOverrides,
        agent,
        (a.overrides ?? {}) as AgentOverrides,
      );
      const byUid = new Map<string, PayloadPredicate[]>();
      for (const t of webhookTriggers(a.triggers)) {
        for (const uid of t.webhookIds) {
          byUid.set(uid, [...(byUid.get(uid) ?? []), compilePayloadFilter(t.payload)]);
        }
      }
      for (const [uid, predicates] of byUid) {
        const trigger: Trigger = {
          automationId: a.id,
          name: a.name,
          prompt: a.prompt,
          config,
          matches: (body) => predicates.some((p) => p(body)),
        };
        index.set(uid, [...(index.get(uid) ?? []), trigger]);
      }
    }
    return index;
  }
}
