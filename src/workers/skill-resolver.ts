import type { Database } from '../database/database.js';
import { skillName } from '../runs/runs.service.js';

/**
 * A run's `skill_spec` → the skill's text, from the factories of the run's team: `owner/repo:name`
 * or `owner/repo:path/SKILL.md`, in a factory whose repository is owner/repo (or, for a local
 * factory, whose name is repo).
 */
export class SkillResolver {
  constructor(private readonly db: Database) {}

  async resolve(teamId: string, spec: string): Promise<string | undefined> {
    const [repo, rest] = spec.split(':', 2);
    if (!rest) return undefined;
    const rows = await this.db.query<{ content: string; repo_url: string; fname: string; path: string }>(
      `SELECT s.content, f.repo_url, f.name AS fname, s.path FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL AND (s.path = $2 OR s.name = $3)`,
      [teamId, rest, skillName(spec)],
    );
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
