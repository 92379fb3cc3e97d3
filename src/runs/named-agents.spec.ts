import { describe, expect, it } from 'vitest';
import { withAgentDefaults } from './named-agents.js';

describe('withAgentDefaults: a run over its named agent', () => {
  const agent = {
    harness: { type: 'claude', auth_secret_name: 'anthropic-key', reasoning_level: 'high' },
    harness_auth_secrets: { claude_auth_secret_name: 'anthropic-key' },
  };

  it('merges harness key by key: a run that picks a model keeps the agent’s type and secret', () => {
    expect(withAgentDefaults({ harness: { model_id: 'claude-haiku-4-5' } }, agent).harness).toEqual({
      type: 'claude',
      auth_secret_name: 'anthropic-key',
      reasoning_level: 'high',
      model_id: 'claude-haiku-4-5',
    });
    // The same type, the run's values winning.
    expect(withAgentDefaults({ harness: { type: 'claude', reasoning_level: 'low' } }, agent).harness).toEqual(
      { type: 'claude', auth_secret_name: 'anthropic-key', reasoning_level: 'low' },
    );
  });

  it('takes none of the agent’s harness settings when the run names another type', () => {
    expect(withAgentDefaults({ harness: { type: 'codex' } }, agent).harness).toEqual({ type: 'codex' });
  });

  it('merges harness_auth_secrets by field', () => {
    expect(
      withAgentDefaults({ harness_auth_secrets: { codex_auth_secret_name: 'openai-key' } }, agent)
        .harness_auth_secrets,
    ).toEqual({ claude_auth_secret_name: 'anthropic-key', codex_auth_secret_name: 'openai-key' });
  });

  it('keeps the agent’s harness when the run sets none, and the run’s when the agent has none', () => {
    expect(withAgentDefaults({}, agent).harness).toEqual(agent.harness);
    expect(withAgentDefaults({ harness: { type: 'gemini' } }, {}).harness).toEqual({ type: 'gemini' });
  });
});
