import type { BuiltInHarness } from '../../harnesses/harness-types.js';
import type { ResolvedEnvironment } from '../../environments/resolved-environment.js';
import type { HarnessEvent } from './harness-protocol.js';

/**
 * What one run's harness output may store (RUN_TRANSCRIPT_MAX_BYTES, RUN_TRANSCRIPT_MAX_EVENTS): bytes
 * as eventBytes counts them, and events, over all its executions.
 */
export interface TranscriptBudget {
  bytes: number;
  events: number;
}

/** A claimed run, with everything a worker needs to start its harness (JSON-safe: it crosses HTTP). */
export interface Assignment {
  run_id: string;
  team_id: string;
  /** The run's team's name: which FACTORY_REPO_ROOTS (`TEAM=/folder`) its environment's local repositories may lie under. */
  team_name?: string;
  execution: number;
  session_id: string;
  prompt: string;
  base_prompt?: string;
  agent_config: Record<string, unknown>;
  followups: string[];
  /** Base64 contents by file name. */
  attachments: Array<{ file_name: string; data: string }>;
  /** The team's managed skills, written under `factory-skills/<factory>/<path>` in the workspace. */
  skills: Array<{ factory: string; path: string; content: string }>;
  history: Array<{ role: string; text: string }>;
  /** The run's idle limit (its own, or the service's default); the worker stops the harness after it. */
  idle_timeout_minutes?: number;
  /** The service's limit on one execution (RUN_MAX_DURATION_MINUTES); the worker stops the harness after it. */
  max_duration_minutes?: number;
  /**
   * The run's transcript budget: the worker stops sending output past it (the service enforces it
   * whatever a worker sends).
   */
  transcript_budget?: TranscriptBudget;
  /** The team's own harness command (service-hosted workers only); else the worker's HARNESS_COMMAND. */
  harness_command?: string;
  /** The run's environment (docs/environments.md): the worker prepares the workspace from it. */
  environment?: ResolvedEnvironment;
  /** The values of the team secrets the environment names, by secret name: for this worker only, never recorded. */
  environment_secrets?: Record<string, string>;
  /** Why the environment cannot be prepared (a secret it names is gone): the run fails before anything starts. */
  environment_problem?: string;
  /**
   * A built-in harness (docs/harnesses.md) instead of the harness command: the worker runs its own
   * adapter around the CLI. `env`: the provider's key (a team secret's value, opened for this
   * execution only); `secret_name` names it in messages; `worker_environment`: the worker's own
   * environment supplies the key; `error`: why it cannot start (a missing secret), said at once;
   * `base_url`: the team's own base URL for the provider (teams set-base-url), which replaces the
   * operator's and which the run's egress proxy admits with its addresses checked.
   */
  harness?: {
    type: BuiltInHarness;
    env?: Record<string, string>;
    base_url?: string;
    secret_name?: string;
    worker_environment?: boolean;
    error?: string;
  };
}

/** What a harness ended with. */
export interface Outcome {
  /** Set when the worker stopped the harness itself. */
  stoppedBy?: 'cancel' | 'idle' | 'max_duration' | 'shutdown';
  exitCode: number | null;
  signal: string | null;
  lastLines: string[];
  result?: Extract<HarnessEvent, { type: 'result' }>;
  /** Events not yet recorded: a short run's whole conversation travels with its end. */
  events?: HarnessEvent[];
  /** Set when the start was not yet reported: how long ago the harness started. */
  startedMsAgo?: number;
  /** The environment could not be prepared (a clone, a setup command): the agent never started. */
  environmentFailure?: string;
  /** The commit checked out for each of the environment's repositories, in its order. */
  commits?: string[];
}

/** What the worker learns when it asks about a run it holds. */
export interface Control {
  /** The run is no longer this worker's to run (cancelled, or lost its lease). */
  stop: boolean;
  /** Stop the current turn (`{"type":"interrupt"}` on the harness's stdin); the run stays live. */
  interrupt?: boolean;
  followups: string[];
}

/**
 * How a worker talks to the service: straight to PostgreSQL (service-hosted workers) or over the
 * worker HTTP API (self-hosted workers). Both end in WorkerRunsService.
 */
export interface WorkerBackend {
  /** This worker's id (as the worker gives it; self-hosted ids are namespaced by team in the service). */
  readonly workerId: string;
  /** Where it reports: earlier workers of the same scope on this machine are its predecessors. */
  readonly scope: string;
  claim(max: number): Promise<Assignment[]>;
  /** Resolves when there may be work, or after `ms`. */
  waitForWork(ms: number): Promise<void>;
  /**
   * Appends events; with `startedMsAgo`, first reports that the harness started that long ago (the
   * start is reported with the first events, or alone after a short delay, or with the end).
   */
  record(runId: string, execution: number, events: HarnessEvent[], startedMsAgo?: number): Promise<void>;
  control(runId: string): Promise<Control>;
  heartbeat(runIds: string[]): Promise<void>;
  finish(runId: string, execution: number, outcome: Outcome): Promise<void>;
  /** Earlier workers (ids) that died on this machine: the runs they held are lost. */
  lost(workerIds: string[]): Promise<void>;
  close(): Promise<void>;
}
