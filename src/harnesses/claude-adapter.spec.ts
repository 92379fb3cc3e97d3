import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claudeAdapter } from './claude-adapter.js';

describe('Claude Code: reasoning_level → --effort', () => {
  const workspace = mkdtempSync(join(tmpdir(), 'factoryd-claude-adapter-'));
  afterAll(() => rmSync(workspace, { recursive: true, force: true }));
  const adapter = (reasoning_level: string) =>
    claudeAdapter({ cli: 'claude', workspace, config: { harness: { type: 'claude', reasoning_level } } });
  const effortOf = (args: string[]) =>
    args.includes('--effort') ? args[args.indexOf('--effort') + 1] : undefined;

  it.each(['low', 'medium', 'high', 'xhigh', 'max'])('passes %s, as Claude Code 2.1 takes it', (level) => {
    const a = adapter(level);
    expect(effortOf(a.args({ text: 'go' }))).toBe(level);
    expect(a.notices).toEqual([]);
  });

  it('passes no other value, and says so', () => {
    const a = adapter('extreme');
    expect(effortOf(a.args({ text: 'go' }))).toBeUndefined();
    expect(a.notices).toEqual([
      'reasoning_level "extreme" is not one Claude Code takes (low, medium, high, xhigh, max): not passed',
    ]);
  });
});
