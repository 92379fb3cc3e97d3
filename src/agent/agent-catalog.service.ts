import { Inject, Injectable } from '@nestjs/common';
import { NotFound } from '../common/problem.js';
import type { AuthContext } from '../auth/auth-context.js';
import { EnvironmentsRepository, presentEnvironment } from '../environments/environments.repository.js';
import { AgentCatalogRepository } from './agent-catalog.repository.js';

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
  constructor(
    @Inject(AgentCatalogRepository) private readonly catalog: AgentCatalogRepository,
    @Inject(EnvironmentsRepository) private readonly defined: EnvironmentsRepository,
  ) {}

  /**
   * AgentListResponse: one agent per skill name, a variant per factory that has it. factoryd refuses a
   * malformed SKILL.md when the definition applies, so `include_malformed_skills` adds nothing, and
   * nothing is cached, so `refresh` has nothing to clear.
   */
  async skills(auth: AuthContext, { sortBy, repo }: SkillListQuery) {
    const rows = await this.catalog.skillsOf(auth.team.id);
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
    const lastRuns = await this.catalog.lastRunsOf(
      auth.team.id,
      variants.map((v) => v.variant.id),
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
   * AgentListEnvironmentsResponse: the environments the team's factories define
   * (environments/<name>.yaml, docs/environments.md), and every other `environment_id` the team uses
   * (in a run, a factory's agentDefaults or agent, a named agent), which prepares nothing: its
   * `config` is its name alone and `setup_failed` is false. A run names an environment by uid or name.
   */
  async environments(auth: AuthContext, { sortBy }: EnvironmentListQuery) {
    const named = await this.catalog.namedEnvironments(auth.team.id);
    const latest = await this.catalog.latestRunPerEnvironment(auth.team.id);
    const envs = new Map<string, Record<string, unknown> & { uid: string; last_updated: string }>();
    const at = (d: Date) => d.toISOString();
    for (const e of await this.defined.list(auth.team.id)) {
      const env = presentEnvironment(e, auth.team.uid) as Record<string, unknown> & {
        uid: string;
        last_updated: string;
      };
      envs.set(e.uid, env);
      envs.set(e.name, env); // named by its name too; listed once
    }
    for (const n of named)
      if (!envs.has(n.env))
        envs.set(n.env, { uid: n.env, config: { name: n.env }, last_updated: at(n.at), setup_failed: false });
    for (const r of latest) {
      const env = envs.get(r.environment_id) ?? {
        uid: r.environment_id,
        config: { name: r.environment_id },
        last_updated: at(r.updated_at),
        setup_failed: false,
      };
      if (at(r.updated_at) > env.last_updated) env.last_updated = at(r.updated_at);
      const seen = env.last_task_created as { created_at: string } | undefined;
      if (seen && seen.created_at >= at(r.created_at)) continue;
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
    const list = [...new Set(envs.values())].map((e) => ({
      ...e,
      scope: { type: 'Team', uid: auth.team.uid },
    }));
    const name = (e: { uid: string; config?: unknown }) => (e.config as { name?: string })?.name ?? e.uid;
    list.sort((a, b) =>
      sortBy === 'name' ? name(a).localeCompare(name(b)) : b.last_updated.localeCompare(a.last_updated),
    );
    return { environments: list };
  }

  /** One environment the team's factories define, by uid or name (CloudEnvironment). */
  async environment(auth: AuthContext, uidOrName: string) {
    const e = await this.defined.find(auth.team.id, uidOrName);
    if (!e)
      throw new NotFound(
        `your team has no environment ${uidOrName}: environments are defined by environments/<name>.yaml in a factory (GET /api/v1/agent/environments lists them)`,
      );
    return presentEnvironment(e, auth.team.uid);
  }
}
