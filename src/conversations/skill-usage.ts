import { posix } from 'node:path';
import type { SkillUsageResponse } from '../contract/generated.js';

/**
 * Team-owned skill usage (docs/workers.md), as a pure function. A load is a `read_skill` action: one
 * with `bundled_skill_id` is a service-provided skill (grouped apart, never counted as the team's);
 * a path-only load counts only when the path lies under a skill root the team manages.
 */
export interface SkillLoad {
  input: Record<string, unknown>;
  runId: string;
  at: Date;
}

/** A factory of the team: its name and repository, whose `skills/` folder is a managed root. */
export interface ManagedFactory {
  name: string;
  repoUrl: string;
}

/** The report (schemas/api/skill-usage-response.schema.json) before it names its `since`. */
export type SkillUsageReport = Omit<SkillUsageResponse, 'since'>;

/**
 * The roots of one factory, in the two forms a harness reports a path in: inside its workspace
 * (`factory-skills/<factory>/skills/…`, where the worker puts the team's skills) and as a skill
 * spec path (`<owner>/<repo>:skills/…`).
 */
export function managedRoots(f: ManagedFactory): string[] {
  const roots = [`factory-skills/${f.name}/skills/`];
  const repo = f.repoUrl
    .replace(/\.git$/, '')
    .replace(/\/+$/, '')
    .split(/[/:]/)
    .slice(-2)
    .join('/');
  if (repo.includes('/')) roots.push(`${repo}:skills/`);
  return roots;
}

export function skillUsage(loads: SkillLoad[], factories: ManagedFactory[]): SkillUsageReport {
  const roots = factories.flatMap((f) => managedRoots(f).map((root) => ({ root, factory: f.name })));
  const skills = new Map<
    string,
    { factory: string; skill: string; path: string; loads: number; runs: Set<string>; last: Date }
  >();
  const bundled = new Map<string, number>();
  let outside = 0;
  for (const load of loads) {
    const id = load.input.bundled_skill_id;
    if (typeof id === 'string' && id) {
      bundled.set(id, (bundled.get(id) ?? 0) + 1);
      continue;
    }
    const path = normalise(load.input.skill_path);
    const hit = path ? roots.find((r) => path.startsWith(r.root) && path.length > r.root.length) : undefined;
    if (!path || !hit) {
      outside++;
      continue;
    }
    const inRoot = path.slice(hit.root.length);
    const skill = inRoot.split('/')[0].replace(/\.md$/, '');
    const key = `${hit.factory}\u0000${skill}`;
    const entry = skills.get(key) ?? {
      factory: hit.factory,
      skill,
      path: `skills/${inRoot}`,
      loads: 0,
      runs: new Set(),
      last: load.at,
    };
    entry.loads++;
    entry.runs.add(load.runId);
    if (load.at > entry.last) entry.last = load.at;
    skills.set(key, entry);
  }
  return {
    skills: [...skills.values()]
      .sort(
        (a, b) => b.loads - a.loads || a.factory.localeCompare(b.factory) || a.skill.localeCompare(b.skill),
      )
      .map((s) => ({
        factory: s.factory,
        skill: s.skill,
        path: s.path,
        loads: s.loads,
        runs: s.runs.size,
        last_loaded_at: s.last.toISOString(),
      })),
    bundled: [...bundled.entries()]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([bundled_skill_id, n]) => ({ bundled_skill_id, loads: n })),
    not_counted: { outside_managed_roots: outside },
  };
}

/** `./a/../b` → `b`; a path that climbs out (`..`) or is absolute matches no root. */
function normalise(p: unknown): string | undefined {
  if (typeof p !== 'string' || !p) return undefined;
  const [spec, rest] = p.includes(':')
    ? [p.slice(0, p.indexOf(':') + 1), p.slice(p.indexOf(':') + 1)]
    : ['', p];
  const n = posix.normalize(rest);
  if (n.startsWith('..') || n.startsWith('/')) return undefined;
  return spec + n;
}
