import { describe, expect, it } from 'vitest';
import { resolveAgentConfig } from './agent-config.js';

describe('resolveAgentConfig', () => {
  it('layers factory defaults, then the agent, then the automation, key by key (MCP servers by name)', () => {
    const config = resolveAgentConfig(
      {
        model: 'm-default',
        environmentId: 'env',
        workerHost: 'warp',
        mcpServers: { a: { url: 'http://a' } },
      },
      {
        name: 'triage',
        basePrompt: 'You triage.',
        overrides: { model: 'm-agent', mcpServers: { b: { command: 'b' } } },
      },
      { workerHost: 'box', idleTimeoutMinutes: 5, mcpServers: { a: { url: 'http://a2' } } },
    );
    expect(config).toEqual({
      name: 'triage',
      base_prompt: 'You triage.',
      model_id: 'm-agent',
      environment_id: 'env',
      worker_host: 'box',
      idle_timeout_minutes: 5,
      mcp_servers: { a: { url: 'http://a2' }, b: { command: 'b' } },
    });
  });

  it('sets only what some layer gives', () => {
    expect(resolveAgentConfig({}, { name: 'x', basePrompt: '', overrides: {} })).toEqual({ name: 'x' });
  });
});
