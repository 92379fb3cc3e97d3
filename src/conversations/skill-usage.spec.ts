import { describe, expect, it } from 'vitest';
import { managedRoots, skillUsage, type SkillLoad } from './skill-usage.js';

const factories = [{ name: 'acme', repoUrl: 'https://github.com/acme/factory.git' }];
const at = new Date('2026-11-01T10:00:00Z');
const load = (input: Record<string, unknown>, runId = 'r1'): SkillLoad => ({ input, runId, at });

describe('skillUsage (docs/workers.md)', () => {
  it('knows a factory by its workspace folder and by its repository', () => {
    expect(managedRoots(factories[0])).toEqual(['factory-skills/acme/skills/', 'acme/factory:skills/']);
  });

  it('counts path loads under a managed root, per skill and run', () => {
    const r = skillUsage(
      [
        load({ skill_path: 'factory-skills/acme/skills/triage/SKILL.md' }),
        load({ skill_path: './factory-skills/acme/skills/triage/SKILL.md' }, 'r2'),
        load({ skill_path: 'acme/factory:skills/release/SKILL.md' }),
      ],
      factories,
    );
    expect(r.skills).toEqual([
      {
        factory: 'acme',
        skill: 'triage',
        path: 'skills/triage/SKILL.md',
        loads: 2,
        runs: 2,
        last_loaded_at: at.toISOString(),
      },
      {
        factory: 'acme',
        skill: 'release',
        path: 'skills/release/SKILL.md',
        loads: 1,
        runs: 1,
        last_loaded_at: at.toISOString(),
      },
    ]);
    expect(r.not_counted.outside_managed_roots).toBe(0);
  });

  it('never counts a bundled skill as the team’s, even with a path under a managed root', () => {
    const r = skillUsage(
      [
        load({ bundled_skill_id: 'pr-comments' }),
        load({ bundled_skill_id: 'pr-comments', skill_path: 'factory-skills/acme/skills/triage/SKILL.md' }),
        load({ bundled_skill_id: 'github-api' }),
      ],
      factories,
    );
    expect(r.skills).toEqual([]);
    expect(r.bundled).toEqual([
      { bundled_skill_id: 'pr-comments', loads: 2 },
      { bundled_skill_id: 'github-api', loads: 1 },
    ]);
  });

  it('does not count paths outside the managed roots, climbing out of one, or of another team’s factory', () => {
    const r = skillUsage(
      [
        load({ skill_path: '/home/dev/.claude/skills/triage/SKILL.md' }),
        load({ skill_path: 'factory-skills/acme/skills/../../other/skills/x/SKILL.md' }),
        load({ skill_path: 'factory-skills/someone-else/skills/triage/SKILL.md' }),
        load({ skill_path: 'other/repo:skills/triage/SKILL.md' }),
        load({ skill_path: 'factory-skills/acme/skills/' }),
        load({ skill_name: 'triage' }),
      ],
      factories,
    );
    expect(r.skills).toEqual([]);
    expect(r.not_counted.outside_managed_roots).toBe(6);
  });
});
