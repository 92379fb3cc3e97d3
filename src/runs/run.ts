import { invalidParam } from '../common/problem.js';
import { RUN_SOURCE_VALUES } from '../contract/generated.js';
import type { RunState } from './run-state.js';

/** What started a run (schemas/api/run-source.schema.json). */
export const RUN_SOURCES = RUN_SOURCE_VALUES;
export type RunSource = (typeof RUN_SOURCES)[number];

/** The schedule that fired a run, as it was then (the clients' `RunItem.schedule`). */
export interface RunSchedule {
  schedule_id: string;
  schedule_name: string;
  cron_schedule: string;
}

/** AmbientAgentConfig as stored on a run (the resolved config). */
export interface AgentConfig {
  name?: string;
  model_id?: string;
  base_prompt?: string;
  environment_id?: string;
  worker_host?: string;
  skill_spec?: string;
  skills?: string[];
  mcp_servers?: Record<string, unknown>;
  idle_timeout_minutes?: number;
  computer_use_enabled?: boolean;
  /** Stored and handed to the harness as given (docs/run-api.md, "Fields factoryd stores for the harness"). */
  computer_use_model_id?: string;
  credential_strategy?: 'CREATOR' | 'EXECUTOR' | null;
  harness?: Record<string, unknown>;
  harness_auth_secrets?: Record<string, unknown>;
  inference_providers?: Record<string, unknown>;
  memory_stores?: Array<Record<string, unknown>>;
  runner_id?: string;
  session_sharing?: Record<string, unknown>;
}

export { SERVICE_WORKER_HOST } from '../common/worker-host.js';

/**
 * A config that names its skills in `skills` only, with the first as `skill_spec` too: the clients
 * read a run's primary skill there, and the list filters, sorts and searches by it.
 */
export function withPrimarySkill(config: AgentConfig): AgentConfig {
  return config.skill_spec === undefined && config.skills?.length
    ? { ...config, skill_spec: config.skills[0] }
    : config;
}

/** The clients' bound on a run's metadata value (RunItem.metadata): at most 256 bytes of UTF-8. */
export const MAX_METADATA_VALUE_BYTES = 256;

/**
 * A 400 when `value`, to be stored as the run metadata key `key`, is over the clients' bound. A JSON
 * Schema's maxLength counts characters, so 200 × é passes it at 400 bytes. `param` is the request
 * field the value comes from, when it is not `metadata.<key>` itself (a factory dispatch's
 * `ticket_ref` becomes `ticket_source` and `ticket_id`).
 */
export function checkMetadataValue(key: string, value: string, param = `metadata.${key}`): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes <= MAX_METADATA_VALUE_BYTES) return;
  const what = param === `metadata.${key}` ? param : `metadata.${key} (from ${param})`;
  throw invalidParam(
    param,
    `${what} must be at most ${MAX_METADATA_VALUE_BYTES} bytes (UTF-8), got ${bytes}`,
  );
}

/** A run's default title: the prompt's first line, at most 100 characters; `fallback` when there is none. */
export function titleFromPrompt(prompt: string, fallback: string): string {
  const firstLine = prompt.trim().split('\n')[0]?.trim() ?? '';
  if (!firstLine) return fallback;
  return firstLine.length > 100 ? `${firstLine.slice(0, 99)}…` : firstLine;
}

/** A run row, as the service reads it (creator joined in). */
export interface Run {
  id: string;
  teamId: string;
  title: string;
  prompt: string;
  state: RunState;
  source: RunSource;
  creator: { type: 'user' | 'service_account'; uid: string; displayName: string } | null;
  agentConfig: AgentConfig;
  workerHost: string;
  metadata: Record<string, string> | null;
  conversationId: string;
  parentRunId: string | null;
  mode: string | null;
  sessionId: string | null;
  statusMessage: { message: string; error_code?: string; reason?: string; retryable?: boolean } | null;
  /**
   * The environment the run used, as resolved when it was claimed (docs/environments.md), with the
   * commits its worker checked out; secrets by name only. Null: it named no environment.
   */
  environment?: Record<string, unknown> | null;
  artifacts: unknown[] | null;
  agentSkill: Record<string, unknown> | null;
  executionLocation: string | null;
  /** The named agent the run ran as (agent_identity_uid); null: the creator executed it. */
  executor: { type: 'service_account'; uid: string; display_name: string } | null;
  createdAt: Date;
  updatedAt: Date;
  startedAt: Date | null;
  endedAt: Date | null;
  /** Tokens per model its harness reported (run_token_usage); null: none reported. */
  modelTokenUsage: Array<{ model_id: string; total_tokens: number }> | null;
  /** The factory whose agent executed it; null: no factory's. */
  factoryUid: string | null;
  /** The top of its parent_run_id chain; null: it is a top-level run (its own root). */
  rootRunId: string | null;
  schedule: RunSchedule | null;
}

export interface NewAttachment {
  fileName: string;
  contentType: string;
  content: Buffer;
  /**
   * The delivery log entry whose payload `content` is (a webhook run's event-payload.json): where
   * the entry is written by the same statement, the attachment is copied from it there instead of
   * sending the bytes again for every run the delivery starts.
   */
  deliveryEntry?: string;
}

/** Everything needed to create a run; API, factory dispatch and webhook automations all build one. */
export interface NewRun {
  teamId: string;
  title: string;
  prompt: string;
  /**
   * The part of the prompt its author wrote, for `q` (default: the whole prompt). A webhook run
   * leaves out the envelope factoryd appends.
   */
  authoredPrompt?: string;
  source: RunSource;
  creatorId: string | null;
  agentConfig: AgentConfig;
  metadata?: Record<string, string>;
  conversationId?: string;
  parentRunId?: string;
  mode?: string;
  attachments?: NewAttachment[];
  /** Who executes it when not its creator: a named agent's service account (`executor` on the wire). */
  executor?: { type: 'service_account'; uid: string; display_name: string };
  /** The factory whose agent executes it (never taken from the caller's metadata). */
  factoryUid?: string;
  /** The schedule firing it. */
  schedule?: RunSchedule;
}
