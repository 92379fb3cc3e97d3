import type { AgentConfig } from '../runs/run.js';

/** Definition keys (camelCase in factory files; snake_case accepted too) → AmbientAgentConfig fields. */
const FIELDS: Record<string, keyof AgentConfig> = {
  name: 'name',
  model: 'model_id',
  modelId: 'model_id',
  model_id: 'model_id',
  basePrompt: 'base_prompt',
  base_prompt: 'base_prompt',
  environmentId: 'environment_id',
  environment_id: 'environment_id',
  workerHost: 'worker_host',
  worker_host: 'worker_host',
  skillSpec: 'skill_spec',
  skill_spec: 'skill_spec',
  skills: 'skills',
  mcpServers: 'mcp_servers',
  mcp_servers: 'mcp_servers',
  idleTimeoutMinutes: 'idle_timeout_minutes',
  idle_timeout_minutes: 'idle_timeout_minutes',
};

/**
 * A run's config, resolved like a factory dispatch: the factory's agentDefaults, then the agent's
 * base prompt and overrides, then the automation's overrides (later layers win, key by key).
 */
export function resolveAgentConfig(
  agentDefaults: Record<string, unknown> | undefined,
  agent: { name: string; basePrompt: string; overrides: Record<string, unknown> } | undefined,
  automationOverrides: Record<string, unknown> | undefined,
): AgentConfig {
  const config: Record<string, unknown> = {};
  const layer = (values: Record<string, unknown> | undefined) => {
    for (const [key, value] of Object.entries(values ?? {})) {
      const field = FIELDS[key];
      if (field && value !== undefined && value !== null) config[field] = value;
    }
  };
  layer(agentDefaults);
  if (agent) {
    config.name = agent.name;
    if (agent.basePrompt) config.base_prompt = agent.basePrompt;
    layer(agent.overrides);
  }
  layer(automationOverrides);
  return config as AgentConfig;
}
