import { Injectable } from '@nestjs/common';
import type { AgentConfig, NewRun } from './run.js';

/** The most metadata keys a run has (20, docs/run-api.md); an agent's stamps are left out rather than pass it. */
const MAX_RUN_METADATA_KEYS = 20;

/** A named agent's defaults, as a run created with `agent_identity_uid` takes them. */
export interface NamedAgentDefaults {
  uid: string;
  name: string;
  config: AgentConfig;
  /** Metadata a run of this agent is stamped with (a factory's agent: `factory_uid`). */
  metadata?: Record<string, string>;
  /** The factory the agent belongs to (a factory's agent) or is linked to (the team's own, `factory_uid`). */
  factoryUid?: string;
}

export interface NamedAgentSource {
  /** The team's named agent `uid` (its MCP credentials opened), or undefined when the team has none such. */
  defaults(teamId: string, uid: string): Promise<NamedAgentDefaults | undefined>;
}

/**
 * Where `runs/` finds named agents without knowing what they are: the module that keeps them (layer 4:
 * a factory's agents among them) registers itself here when it starts.
 */
@Injectable()
export class NamedAgents {
  private source?: NamedAgentSource;

  register(source: NamedAgentSource): void {
    this.source = source;
  }

  async defaults(teamId: string, uid: string): Promise<NamedAgentDefaults | undefined> {
    return this.source?.defaults(teamId, uid);
  }
}

/**
 * The run's config over the named agent's: a key the run sets wins; MCP servers merge by name (the
 * run's entry wins); `harness` and `harness_auth_secrets` merge key by key (a run that only picks a
 * model keeps the agent's harness type and its key's secret), except that a run naming another
 * harness type than the one the agent names takes none of the agent's harness settings (its model and its
 * key are another provider's); the agent's skills apply only when the run names no skill of its own.
 */
export function withAgentDefaults(run: AgentConfig, agent: AgentConfig): AgentConfig {
  const merged: AgentConfig = { ...agent, ...run };
  if (agent.mcp_servers || run.mcp_servers) merged.mcp_servers = { ...agent.mcp_servers, ...run.mcp_servers };
  const otherType =
    run.harness?.type !== undefined &&
    agent.harness?.type !== undefined &&
    run.harness.type !== agent.harness.type;
  if (run.harness && agent.harness && !otherType) merged.harness = { ...agent.harness, ...run.harness };
  if (run.harness_auth_secrets && agent.harness_auth_secrets)
    merged.harness_auth_secrets = { ...agent.harness_auth_secrets, ...run.harness_auth_secrets };
  if (run.skill_spec !== undefined || run.skills !== undefined) {
    if (run.skills === undefined) delete merged.skills;
    if (run.skill_spec === undefined) delete merged.skill_spec;
  }
  return merged;
}

/**
 * What a run started as the named agent `agent` (`agent_identity_uid`, a schedule's `agent_uid`)
 * carries besides its config (merged by withAgentDefaults): the agent's metadata stamps under the
 * run's own (all of them or, past the key limit, none), the agent as the run's executor, and the
 * agent's factory as the factory that executed it.
 */
export function namedAgentMarks(
  metadata: Record<string, string> | undefined,
  agent: NamedAgentDefaults,
): Pick<NewRun, 'metadata' | 'executor' | 'factoryUid'> {
  const all = agent.metadata ? { ...agent.metadata, ...metadata } : metadata;
  return {
    metadata: all && Object.keys(all).length <= MAX_RUN_METADATA_KEYS ? all : metadata,
    executor: { type: 'service_account', uid: agent.uid, display_name: agent.name },
    ...(agent.factoryUid ? { factoryUid: agent.factoryUid } : {}),
  };
}
