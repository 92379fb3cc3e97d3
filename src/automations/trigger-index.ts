import { Inject, Injectable } from '@nestjs/common';
import { compilePayloadFilter, type PayloadPredicate } from './payload-filter.js';
import type { AgentOverrides } from '../definitions/definition.js';
import { resolveAgentConfig } from '../definitions/agent-config.js';
import type { Queryable } from '../database/database.js';
import type { AgentConfig } from '../runs/run.js';
import { AutomationsRepository, type AgentRow, type AutomationRow } from './automations.repository.js';
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

/** A live automation of an applied factory: its triggers as stored and the run config it resolves to. */
export interface AutomationWithConfig extends AutomationTarget {
  enabled: boolean;
  path: string;
  triggers: unknown;
}

/**
 * Builds, per applied factory, the triggers of each webhook UID from the enabled automations:
 * loaded and compiled once per apply (the caller refreshes it when an apply is announced).
 */
@Injectable()
export class TriggerIndex {
  constructor(@Inject(AutomationsRepository) private readonly repo: AutomationsRepository) {}

  /**
   * Every live automation of a factory (enabled or not), with the config its runs get; read through
   * `q` (a transaction of the caller's, e.g. the schedules' sync under the factory's lock).
   */
  async automations(factoryId: string, q?: Queryable): Promise<AutomationWithConfig[]> {
    // One after another: a transaction's client runs one query at a time.
    const agentDefaults = await this.repo.agentDefaults(factoryId, q);
    const agents = await this.repo.liveAgents(factoryId, q);
    return (await this.repo.liveAutomations(factoryId, q)).map((a) => ({
      automationId: a.id,
      name: a.name,
      path: a.path,
      enabled: a.enabled,
      prompt: a.prompt,
      config: configOf(agentDefaults, agents, a),
      triggers: a.triggers,
    }));
  }

  async load(factoryId: string): Promise<Map<string, Trigger[]>> {
    const [agentDefaults, agents, automations, factoryUid] = await Promise.all([
      this.repo.agentDefaults(factoryId),
      this.repo.liveAgents(factoryId),
      this.repo.enabledAutomations(factoryId),
      this.repo.factoryUid(factoryId),
    ]);
    const index = new Map<string, Trigger[]>();
    for (const a of automations) {
      const config = configOf(agentDefaults, agents, a);
      const byUid = new Map<string, PayloadPredicate[]>();
      for (const t of webhookTriggers(a.triggers)) {
        for (const uid of t.webhookIds) {
          byUid.set(uid, [...(byUid.get(uid) ?? []), compilePayloadFilter(t.payload)]);
        }
      }
      for (const [uid, predicates] of byUid) {
        const trigger: Trigger = {
          automationId: a.id,
          factoryUid,
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

/**
 * An automation's run config: factory.yaml's agentDefaults, then its agent (the foreman when it names
 * none), then its own overrides.
 */
function configOf(agentDefaults: Record<string, unknown>, agents: AgentRow[], a: AutomationRow): AgentConfig {
  const agentRow = a.agent_name
    ? agents.find((g) => g.name === a.agent_name)
    : agents.find((g) => g.agent_type === 'FOREMAN');
  // Validation guarantees the agent at apply; should it be gone, the run still gets the defaults.
  const agent = {
    name: agentRow?.name ?? a.name,
    basePrompt: agentRow?.base_prompt ?? '',
    overrides: (agentRow?.overrides ?? {}) as AgentOverrides,
  };
  return resolveAgentConfig(agentDefaults as AgentOverrides, agent, (a.overrides ?? {}) as AgentOverrides);
}
