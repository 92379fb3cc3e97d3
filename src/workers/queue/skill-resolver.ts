import { skillName } from '../../runs/runs.service.js';
import type { RunQueueRepository } from './run-queue.repository.js';

/**
 * A run's `skill_spec` → the skill's text, from the factories of the run's team: `owner/repo:name`
 * or `owner/repo:path/SKILL.md`, in a factory whose repository is owner/repo (or, for a local
 * factory, whose name is repo).
 */
export class SkillResolver {
  constructor(private readonly queue: RunQueueRepository) {}

  async resolve(teamId: string, spec: string): Promise<string | undefined> {
    const [repo, rest] = spec.split(':', 2);
    if (!rest) return undefined;
    const rows = await this.queue.skillCandidates(teamId, rest, skillName(spec));
    const repoName = repo.split('/')[1] ?? repo;
    const matches = (r: { repo_url: string; fname: string }) =>
      r.repo_url
        .replace(/\.git$/, '')
        .replace(/\/+$/, '')
        .endsWith(repo) || r.fname === repoName;
    const exact = rows.filter(matches).find((r) => r.path === rest) ?? rows.filter(matches)[0];
    return exact?.content;
  }
}
