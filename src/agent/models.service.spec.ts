import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../auth/auth-context.js';
import { loadConfig } from '../config/config.js';
import type { DetectedHarness } from '../config/harness-detection.js';
import { ModelsService } from './models.service.js';

const auth = { team: { id: 'team-1' } } as AuthContext;
const service = (models: string, detected: DetectedHarness[]) =>
  new ModelsService(loadConfig({ HARNESS_MODELS: models }), { detected: async () => detected });

describe('GET /agent/models', () => {
  it('lists the operator’s models and those a detected CLI reports, each saying where it comes from', async () => {
    const list = await service('codex:gpt-5-codex,claude:claude-sonnet-4-5', [
      {
        type: 'claude',
        version: '2.1.197',
        where: 'service',
        models: ['claude-sonnet-4-5', 'claude-haiku-4-5'],
      },
    ]).list(auth);
    expect(list.models.map((m) => [m.id, m.provider, m.disable_reason, m.description])).toEqual([
      [
        'gpt-5-codex',
        'OPENAI',
        'ADMIN_DISABLED',
        "codex harness; listed by the operator (HARNESS_MODELS); Codex CLI is not installed on any machine that runs this team's runs (npx factoryd harnesses install codex)",
      ],
      [
        'claude-sonnet-4-5',
        'ANTHROPIC',
        undefined,
        'claude harness (Claude Code 2.1.197); listed by the operator (HARNESS_MODELS)',
      ],
      [
        'claude-haiku-4-5',
        'ANTHROPIC',
        undefined,
        'claude harness (Claude Code 2.1.197); reported by the CLI on service',
      ],
    ]);
    // The first usable one, in the operator's order.
    expect(list.default_model_id).toBe('claude-sonnet-4-5');
  });

  it('invents nothing: no configuration and no CLI is an empty list', async () => {
    expect(await service('', []).list(auth)).toEqual({ default_model_id: '', models: [] });
  });

  it('refuses a HARNESS_MODELS entry it cannot read, naming the variable', () => {
    expect(() => loadConfig({ HARNESS_MODELS: 'claude-sonnet' })).toThrow(
      /^HARNESS_MODELS: "claude-sonnet" is not <harness>:<model id>/,
    );
    expect(() => loadConfig({ HARNESS_MODELS: 'cursor:x' })).toThrow(/HARNESS_MODELS/);
  });
});
