import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Database } from '../database/database.js';

/** `owner/repo` of a factory's repository URL or path: its last two segments (`.git` dropped). */
export function repoOf(repoUrl: string, factoryName: string): { owner: string; name: string } {
  const parts = repoUrl
    .replace(/\.git$/, '')
    .replace(/\/+$/, '')
    .split(/[/:]/)
    .filter(Boolean);
  return { owner: parts.at(-2) ?? factoryName, name: parts.at(-1) ?? factoryName };
}

export interface SkillListQuery {
  sortBy: 'name' | 'last_run';
  repo?: string;
}

export interface EnvironmentListQuery {
  sortBy: 'name' | 'last_updated';
}

/**
 * What a team can run with: the skills its factories manage (`GET /agent`) and the environments its
 * runs, factories and named agents name (`GET /agent/environments`).
 */
@Injectable()
export class AgentCatalogService {
  constructor(@Inject(Database) private readonly db: Database) {}

  /**
   * AgentListResponse: one agent per skill name, a variant per factory that has it. factoryd refuses a
   * malformed SKILL.md when the definition applies, so `include_malformed_skills` adds nothing, and
   * nothing is cached, so `refresh` has nothing to clear.
   */
  async skills(auth: AuthContext, { sortBy, repo }: SkillListQuery) {
    const rows = await this.db.query<{
      name: string;
      path: string;
      description: string | null;
      content: string;
      repo_url: string;
      factory: string;
    }>(
      `SELECT s.name, s.path, s.description, s.content, f.repo_url, f.name AS factory
         FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL ORDER BY s.name, f.name, s.path`,
      [auth.team.id],
    );
    const variants = rows
      .map((r) => {
        const source = repoOf(r.repo_url, r.factory);
        return {
          name: r.name,
          variant: {
            id: `${source.owner}/${source.name}:${r.path}`,
            base_prompt: r.content,
            description: r.description ?? '',
            environments: [] as Array<{ name: string; uid: string }>,
            source: { owner: source.owner, name: source.name, skill_path: r.path },
          } as Record<string, unknown> & { id: string },
        };
      })
      .filter((v) => !repo || v.variant.id.startsWith(`${repo}:`));
    const lastRuns = await this.db.query<{ skill_spec: string; at: Date }>(
      `SELECT skill_spec, max(created_at) AS at FROM runs
        WHERE team_id = $1 AND skill_spec = ANY($2::text[]) GROUP BY skill_spec`,
      [auth.team.id, variants.map((v) => v.variant.id)],
    );
    const lastRun = new Map(lastRuns.map((r) => [r.skill_spec, r.at.toISOString()]));
    const agents = new Map<string, { name: string; variants: Array<Record<string, unknown>> }>();
    for (const { name, variant } of variants) {
      const at = lastRun.get(variant.id);
      if (at) variant.last_run_timestamp = at;
      const agent = agents.get(name) ?? { name, variants: [] };
      agent.variants.push(variant);
      agents.set(name, agent);
    }
    const list = [...agents.values()];
    if (sortBy === 'last_run') {
      const latest = (a: (typeof list)[number]) =>
        a.variants.reduce(
          (m, v) => ((v.last_run_timestamp as string) > m ? (v.last_run_timestamp as string) : m),
          '',
        );
      list.sort((a, b) => latest(b).localeCompare(latest(a)) || a.name.localeCompare(b.name));
    }
    return { agents: list };
  }

  /**
   * AgentListEnvironmentsResponse. An environment is an `environment_id` the team uses: in a run, a
   * factory's agentDefaults or agent, or a named agent. factoryd gives it no setup of its own (the
   * harness's workspace is the environment), so `setup_failed` is false and `config` is its name.
   */
  async environments(auth: AuthContext, { sortBy }: EnvironmentListQuery) {
    const named = await this.db.query<{ env: string; at: Date }>(
      `SELECT env, max(at) AS at FROM (
         SELECT f.definition->'agentDefaults'->>'environmentId' AS env, f.updated_at AS at FROM factories f WHERE f.team_id = $1
         UNION ALL
         SELECT a.overrides->>'environmentId', a.updated_at FROM agents a JOIN factories f ON f.id = a.factory_id
          WHERE f.team_id = $1 AND a.deleted_at IS NULL
         UNION ALL
         SELECT defaults->>'environment_id', updated_at FROM agent_identities WHERE team_id = $1
       ) e WHERE env IS NOT NULL GROUP BY env`,
      [auth.team.id],
    );
    const latest = await this.db.query<{
      environment_id: string;
      id: string;
      title: string;
      state: string;
      created_at: Date;
      updated_at: Date;
      started_at: Date | null;
    }>(
      `SELECT DISTINCT ON (environment_id) environment_id, id, title, state, created_at, updated_at, started_at
         FROM runs WHERE team_id = $1 AND environment_id IS NOT NULL
        ORDER BY environment_id, created_at DESC, id DESC`,
      [auth.team.id],
    );
    const envs = new Map<string, Record<string, unknown> & { uid: string; last_updated: string }>();
    const at = (d: Date) => d.toISOString();
    for (const n of named)
      envs.set(n.env, { uid: n.env, config: { name: n.env }, last_updated: at(n.at), setup_failed: false });
    for (const r of latest) {
      const env = envs.get(r.environment_id) ?? {
        uid: r.environment_id,
        config: { name: r.environment_id },
        last_updated: at(r.updated_at),
        setup_failed: false,
      };
      if (at(r.updated_at) > env.last_updated) env.last_updated = at(r.updated_at);
      env.last_task_created = {
        id: r.id,
        title: r.title,
        state: r.state,
        created_at: at(r.created_at),
        updated_at: at(r.updated_at),
        started_at: r.started_at ? at(r.started_at) : null,
      };
      if (r.started_at) env.last_task_run_timestamp = at(r.started_at);
      envs.set(r.environment_id, env);
    }
    const list = [...envs.values()].map((e) => ({ ...e, scope: { type: 'Team', uid: auth.team.uid } }));
    list.sort((a, b) =>
      sortBy === 'name' ? a.uid.localeCompare(b.uid) : b.last_updated.localeCompare(a.last_updated),
    );
    return { environments: list };
  }
}
