import type { RunItem } from '../contract/generated.js';
import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import type { Run } from './run.js';
import { isTerminal } from './run-state.js';
import { isoDuration } from '../common/durations.js';

/** RunItem on the wire (docs/run-api.md; schemas/api/run-item.schema.json): snake_case, RFC 3339 UTC, optional fields only when known. */
export function presentRun(run: Run, publicBaseUrl: string, now: Date): RunItem {
  const item: RunItem = {
    run_id: run.id,
    task_id: run.id,
    title: run.title,
    prompt: run.prompt,
    state: run.state,
    created_at: run.createdAt.toISOString(),
    updated_at: run.updatedAt.toISOString(),
    finished_at: isTerminal(run.state) && run.endedAt ? run.endedAt.toISOString() : null,
    root_run_id: run.rootRunId ?? run.id,
    source: run.source,
    // Stored as validated on the way in (RunCreateRequest), so of the schema's shape.
    agent_config: redactMcpCredentials(run.agentConfig) as RunItem['agent_config'],
    conversation_id: run.conversationId,
    // The Oz enum: LOCAL is the caller's own Warp app, REMOTE a worker. Every factoryd run runs on a
    // worker, service-hosted or self-hosted (agent_config.worker_host tells which).
    execution_location: 'REMOTE',
    is_run_type_cancellable: !isTerminal(run.state) && run.state !== 'PENDING',
  };
  if (run.startedAt) {
    item.started_at = run.startedAt.toISOString();
    item.run_time = isoDuration((run.endedAt ?? now).getTime() - run.startedAt.getTime());
  }
  if (run.creator)
    item.creator = { type: run.creator.type, uid: run.creator.uid, display_name: run.creator.displayName };
  if (run.executor) item.executor = run.executor;
  else if (item.creator) item.executor = item.creator;
  if (run.sessionId) {
    item.session_id = run.sessionId;
    // The run's page in the dashboard (a browser cannot send the API key an API URL needs).
    item.session_link = runPageUrl(publicBaseUrl, run.id);
  }
  if (run.parentRunId) item.parent_run_id = run.parentRunId;
  if (run.factoryUid) item.factory_uid = run.factoryUid;
  if (run.schedule) item.schedule = run.schedule;
  if (run.metadata) item.metadata = run.metadata;
  // The service writes only the schema's codes and reasons: each end reason and the ErrorCode that fits
  // it are paired in one place (ERROR_CODE_OF, src/workers/queue/run-decisions.ts).
  if (run.statusMessage) item.status_message = run.statusMessage as RunItem['status_message'];
  if (run.artifacts) item.artifacts = run.artifacts as RunItem['artifacts'];
  if (run.agentSkill) item.agent_skill = run.agentSkill;
  if (run.modelTokenUsage) {
    // Every model a factoryd run uses is called with the team's own provider credential (a team
    // secret, or a self-hosted worker's environment): the Oz enum's `byok`.
    const models = run.modelTokenUsage.map((m) => ({
      ...m,
      total_tokens: Number(m.total_tokens),
      usage_type: 'byok' as const,
    }));
    item.request_usage = {
      model_token_usage: models,
      total_tokens: models.reduce((sum, m) => sum + m.total_tokens, 0),
    };
  }
  if (run.environment) item.environment = run.environment;
  return item;
}

/** A run's page in the dashboard. */
export function runPageUrl(publicBaseUrl: string, runId: string): string {
  return `${publicBaseUrl}/ui/runs/${runId}`;
}
