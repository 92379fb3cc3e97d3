import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import type { Profile, Schedule } from './schedule.js';

/** ScheduledAgentItem on the wire, as the Oz clients read it (plus `history.last_run_id` and `factory`). */
export function presentSchedule(s: Schedule): Record<string, unknown> {
  const item: Record<string, unknown> = {
    id: s.id,
    name: s.name,
    cron_schedule: s.cronSchedule,
    enabled: s.enabled,
    prompt: s.prompt,
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
    agent_config: redactMcpCredentials(s.agentConfig),
    scope: { type: 'Team', uid: s.teamUid },
    history: {
      last_ran: s.lastFiredAt?.toISOString() ?? null,
      last_run_id: s.lastRunId,
      next_run: s.nextFireAt?.toISOString() ?? null,
    },
    last_spawn_error: s.lastSpawnError,
  };
  if (s.agentUid) item.agent_uid = s.agentUid;
  // CloudEnvironmentConfig: an environment is a name here (GET /agent/environments gives the same).
  if (s.agentConfig.environment_id) item.environment = { name: s.agentConfig.environment_id };
  if (s.metadata) item.metadata = s.metadata;
  if (s.mode) item.mode = s.mode;
  if (s.createdBy) item.created_by = profile(s.createdBy);
  if (s.updatedBy) item.updated_by = profile(s.updatedBy);
  if (s.factory)
    item.factory = {
      uid: s.factory.uid,
      automation: s.factory.automation,
      trigger_index: s.factory.triggerIndex,
    };
  return item;
}

const profile = (p: Profile) => ({ uid: p.uid, type: p.type, display_name: p.displayName });
