import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import { sqlStates, TERMINAL_STATES } from '../runs/run-state.js';

/**
 * The reads behind the agent catalog (`GET /agent`, `GET /agent/environments`) and the clients'
 * redirect checks, each within one team; AgentCatalogService and RedirectsService shape the answers.
 */
@Injectable()
export class AgentCatalogRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** The live skills of the team's factories, with the factory each is in. */
  skillsOf(teamId: string) {
    return this.db.query<{
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
      [teamId],
    );
  }

  /** When each of these skill specs last started a run of the team. */
  lastRunsOf(teamId: string, skillSpecs: string[]) {
    return this.db.query<{ skill_spec: string; at: Date }>(
      `SELECT skill_spec, max(created_at) AS at FROM runs
        WHERE team_id = $1 AND skill_spec = ANY($2::text[]) GROUP BY skill_spec`,
      [teamId, skillSpecs],
    );
  }

  /** Environments named by the team's factories, their agents and its named agents, with the last change. */
  namedEnvironments(teamId: string) {
    return this.db.query<{ env: string; at: Date }>(
      `SELECT env, max(at) AS at FROM (
         SELECT f.definition->'agentDefaults'->>'environmentId' AS env, f.updated_at AS at FROM factories f WHERE f.team_id = $1
         UNION ALL
         SELECT a.overrides->>'environmentId', a.updated_at FROM agents a JOIN factories f ON f.id = a.factory_id
          WHERE f.team_id = $1 AND a.deleted_at IS NULL
         UNION ALL
         SELECT defaults->>'environment_id', updated_at FROM agent_identities WHERE team_id = $1
       ) e WHERE env IS NOT NULL GROUP BY env`,
      [teamId],
    );
  }

  /** The team's newest run in each environment its runs name. */
  latestRunPerEnvironment(teamId: string) {
    return this.db.query<{
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
      [teamId],
    );
  }

  /** The team's run with this session, and whether it has ended. */
  /** The run of this session, in the team (null: whichever team's, for the holder of the session id). */
  runOfSession(teamId: string | null, sessionId: string) {
    return this.db.query<{ id: string; conversation_id: string; ended: boolean }>(
      `SELECT id, conversation_id, state IN ${ENDED} AS ended FROM runs
        WHERE session_id = $1 AND ($2::uuid IS NULL OR team_id = $2)`,
      [sessionId, teamId],
    );
  }

  /** The team's newest run in this conversation, and whether it has ended. */
  newestRunOfConversation(teamId: string, conversationId: string) {
    return this.db.query<{ id: string; session_id: string | null; ended: boolean }>(
      `SELECT id, session_id, state IN ${ENDED} AS ended FROM runs WHERE conversation_id = $1 AND team_id = $2
        ORDER BY created_at DESC, id DESC LIMIT 1`,
      [conversationId, teamId],
    );
  }
}

const ENDED = `(${sqlStates([...TERMINAL_STATES])})`;
