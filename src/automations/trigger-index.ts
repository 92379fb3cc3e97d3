import { Inject, Injectable } from '@nestjs/common';
import { compileHeaderFilter, headerNames } from './header-filter.js';
import { compilePayloadFilter } from './payload-filter.js';
import type { AgentOverrides } from '../definitions/definition.js';
import { resolveAgentConfig } from '../definitions/agent-config.js';
import type { Queryable } from '../database/database.js';
import type { AgentConfig } from '../runs/run.js';
import { AutomationsRepository, type AgentRow, type AutomationRow } from './automations.repository.js';
import type { AutomationTarget } from './run-envelope.js';

/** A delivery as a trigger sees it: the parsed body and the headers stored with it (lower-case names). */
export type DeliveryMatch = (body: unknown, headers: Readonly<Record<string, string>>) => boolean;

/** An automation that a webhook's delivery may start, with its payload and header filters compiled. */
export interface Trigger extends AutomationTarget {
  /** True when any of the automation's triggers on this webhook accepts the body and headers. */
  matches: DeliveryMatch;
  /** The header names its header filters read: the ingress stores these with each delivery. */
  headerNames: string[];
}

interface WebhookTriggerSpec {
  provider?: unknown;
  event?: unknown;
  filter?: {
    webhook_ids?: unknown;
    payload?: Record<string, unknown> | null;
    headers?: Record<string, unknown> | null;
  };
}

/** A webhook trigger's selection: the UIDs it selects, its payload filter and its header filter. */
export interface WebhookTriggerFilter {
  webhookIds: string[];
  payload?: Record<string, unknown> | null;
  headers?: Record<string, unknown> | null;
}

/** An automation's triggers that fire on webhook deliveries. */
export function webhookTriggers(triggers: unknown): WebhookTriggerFilter[] {
  const out: WebhookTriggerFilter[] = [];
  for (const t of (Array.isArray(triggers) ? triggers : []) as WebhookTriggerSpec[]) {
    if (t.provider !== 'webhook' || (t.event !== undefined && t.event !== 'received')) continue;
    const ids = Array.isArray(t.filter?.webhook_ids) ? (t.filter.webhook_ids as unknown[]) : [];
    out.push({
      webhookIds: ids.filter((x): x is string => typeof x === 'string'),
      payload: t.filter?.payload,
      headers: t.filter?.headers,
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
      const byUid = new Map<string, Array<{ match: DeliveryMatch; headerNames: string[] }>>();
      for (const t of webhookTriggers(a.triggers)) {
        const payload = compilePayloadFilter(t.payload);
        const headers = compileHeaderFilter(t.headers);
        const compiled = {
          match: ((b, h) => payload(b) && headers(h)) as DeliveryMatch,
          headerNames: headerNames(t.headers),
        };
        for (const uid of t.webhookIds) byUid.set(uid, [...(byUid.get(uid) ?? []), compiled]);
      }
      for (const [uid, compiled] of byUid) {
        const trigger: Trigger = {
          automationId: a.id,
          factoryUid,
          name: a.name,
          prompt: a.prompt,
          config,
          matches: (body, headers) => compiled.some((c) => c.match(body, headers)),
          headerNames: [...new Set(compiled.flatMap((c) => c.headerNames))],
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
