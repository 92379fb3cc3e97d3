import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import type { AgentConfig, Run, RunSchedule } from './run.js';
import { isTerminal } from './run-state.js';
import { isoDuration } from '../common/durations.js';

/** RunItem on the wire (CONTRACT.md §1): snake_case, RFC 3339 UTC, optional fields only when known. */
export interface RunItem {
  run_id: string;
  task_id: string;
  title: string;
  prompt: string;
  state: string;
  created_at: string;
  updated_at: string;
  /** When it last ended; null while it is live. */
  finished_at: string | null;
  /** The top of its parent_run_id chain (its own id for a top-level run). */
  root_run_id: string;
  started_at?: string | null;
  run_time?: string;
  source?: string;
  creator?: { type: string; uid: string; display_name: string };
  session_id?: string;
  session_link?: string;
  agent_config?: AgentConfig;
  conversation_id?: string;
  parent_run_id?: string;
  metadata?: Record<string, string>;
  status_message?: { message: string; error_code?: string; reason?: string; retryable?: boolean };
  execution_location?: 'LOCAL' | 'REMOTE';
  executor?: { type: string; uid: string; display_name: string };
  is_run_type_cancellable?: boolean;
  artifacts?: unknown[];
  agent_skill?: Record<string, unknown>;
  request_usage?: {
    model_token_usage: Array<{ model_id: string; total_tokens: number; usage_type: 'byok' }>;
    total_tokens: number;
  };
  factory_uid?: string;
  schedule?: RunSchedule;
  /** factoryd's own: the environment the run used, as resolved (image, repositories at their commits, setup commands). */
  environment?: Record<string, unknown>;
}

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
    agent_config: redactMcpCredentials(run.agentConfig),
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
  if (run.statusMessage) item.status_message = run.statusMessage;
  if (run.artifacts) item.artifacts = run.artifacts;
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
