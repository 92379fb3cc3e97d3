import type { AgentDefinition, AgentOverrides } from './definition.js';

/** A run's AmbientAgentConfig (the wire shape, snake_case), as far as a definition sets it. */
export interface ResolvedAgentConfig {
  name: string;
  base_prompt?: string;
  model_id?: string;
  environment_id?: string;
  worker_host?: string;
  idle_timeout_minutes?: number;
  mcp_servers?: Record<string, unknown>;
  /** The run's `harness` (the wire shape): type, reasoning level and the credential's source. */
  harness?: Record<string, unknown>;
}

/**
 * The run config of an agent: factory.yaml's agentDefaults, then the agent's overrides, then (for an
 * automation's run) the automation's overrides, each replacing the one before key by key (MCP servers
 * by server name). The agent's body is the base prompt.
 */
export function resolveAgentConfig(
  defaults: AgentOverrides,
  agent: Pick<AgentDefinition, 'name' | 'overrides' | 'basePrompt'>,
  automation: AgentOverrides = {},
): ResolvedAgentConfig {
  const layers = [defaults, agent.overrides, automation];
  const pick = <K extends keyof AgentOverrides>(key: K) =>
    layers.reduce<AgentOverrides[K] | undefined>((v, l) => (l[key] !== undefined ? l[key] : v), undefined);
  const config: ResolvedAgentConfig = { name: agent.name };
  if (agent.basePrompt) config.base_prompt = agent.basePrompt;
  const model = pick('model');
  if (model !== undefined) config.model_id = model;
  const environment = pick('environmentId');
  if (environment !== undefined) config.environment_id = environment;
  const workerHost = pick('workerHost');
  if (workerHost !== undefined) config.worker_host = workerHost;
  const idle = pick('idleTimeoutMinutes');
  if (idle !== undefined) config.idle_timeout_minutes = idle;
  const harness: Record<string, unknown> = {};
  const type = pick('harness');
  if (type !== undefined) harness.type = type;
  const reasoning = pick('reasoningLevel');
  if (reasoning !== undefined) harness.reasoning_level = reasoning;
  const auth = pick('auth');
  if (auth && 'managedSecret' in auth) harness.auth_secret_name = auth.managedSecret;
  if (auth && 'workerEnvironment' in auth) harness.worker_environment = true;
  if (Object.keys(harness).length) config.harness = harness;
  const mcp = Object.assign({}, ...layers.map((l) => l.mcpServers ?? {})) as Record<string, unknown>;
  if (Object.keys(mcp).length) config.mcp_servers = mcp;
  return config;
}
