import type { RunEvent, RunState } from '../../runs/run-state.js';
import type { Outcome, TranscriptBudget } from '../protocol/assignment.js';

/**
 * What the service decides about runs its workers hold, as pure functions of the run, the worker's
 * report, the policy and the clock: which state a run ends in and why, and when a lease or a worker
 * counts as gone. WorkerRunsService reads and writes; these decide.
 */

/** The service's rules for running runs (from the environment: `runPolicy(config)`). */
export interface RunPolicy {
  leaseMs: number;
  /** Given to a run without `idle_timeout_minutes` (0: none). */
  idleTimeoutMinutes: number;
  /** The longest one execution may run (0: no limit). */
  maxDurationMinutes: number;
  /** How long one minute of these limits lasts (shortened by tests only). */
  minuteMs: number;
  /** Service-hosted slots one team may hold (unless it has its own); undefined: all but one when other teams exist. */
  teamMaxSlots?: number;
  /** What one run's harness output may store (RUN_TRANSCRIPT_MAX_BYTES, RUN_TRANSCRIPT_MAX_EVENTS). */
  transcriptBudget: TranscriptBudget;
  /**
   * The destinations the operator trusts for harnesses (Config.harnessEgress.trusted): the only
   * loopback or private addresses a team's base URL may name (harnesses/base-url.ts).
   */
  egressTrusted?: ReadonlyArray<{ host: string; port: number }>;
}

export type StatusMessage = { message: string; error_code?: string; reason?: EndReason; retryable?: boolean };

/**
 * Why a run ended other than by succeeding, and the clients' ErrorCode that fits it, where one does
 * (docs/run-api.md, "Why a run ended"). The clients' enum is closed (the Python client refuses any
 * other value), so the reason goes in `status_message.reason`, which they do not constrain.
 */
const ERROR_CODE_OF = {
  // The agent itself did not succeed, or stalled: the enum names platform and input errors only.
  agent_failed: undefined,
  idle_timeout: undefined,
  // The service's limit on one execution's time: a budget the run used up, as the enum has it.
  max_duration: 'budget_exceeded',
  lease_expired: 'resource_unavailable',
  worker_lost: 'resource_unavailable',
  environment_setup_failed: 'environment_setup_failed',
} as const;
export type EndReason = keyof typeof ERROR_CODE_OF;

/** A status message for a run that ended for `reason`: the fitting ErrorCode beside it, when there is one. */
function ended(reason: EndReason, message: string, retryable?: true): StatusMessage {
  const code = ERROR_CODE_OF[reason];
  return { message, reason, ...(code ? { error_code: code } : {}), ...(retryable ? { retryable } : {}) };
}

/** A state change: from `from`, the events of `path` in turn, ending with `statusMessage`. */
export interface RunEnd {
  path: RunEvent[];
  statusMessage: StatusMessage;
}

/** A worker holds a run (and its lease) in these states. */
export const HELD_STATES: readonly RunState[] = ['CLAIMED', 'INPROGRESS', 'BLOCKED'];
export const isHeld = (state: RunState) => HELD_STATES.includes(state);

const LAST_LINES_IN_MESSAGE = 5;
/** A worker's `startedMsAgo` beyond this is a broken worker's figure. */
const DAY_MS = 86_400_000;
/** How long a worker that stopped heartbeating stays in the registry (for the connected list's history). */
const FORGET_WORKERS_AFTER_MS = 3600_000;

/** The worker measured `msAgo`; a negative or absurd figure (a broken worker) counts as now. */
export function startedAt(now: Date, msAgo: number): Date {
  return new Date(now.getTime() - (msAgo >= 0 && msAgo < DAY_MS ? msAgo : 0));
}

/** The one note in a run's conversation where its output passed the transcript budget. */
export function transcriptNote(budget: TranscriptBudget): string {
  return (
    `factoryd: the output of this run passed its transcript budget (${budget.bytes} bytes or ` +
    `${budget.events} events: RUN_TRANSCRIPT_MAX_BYTES, RUN_TRANSCRIPT_MAX_EVENTS); what its harness ` +
    `printed after this point was not stored. The run went on; its result still ends it.`
  );
}

/** A lease taken or renewed `now` lasts until this. */
export const leaseEnd = (now: Date, policy: RunPolicy) => new Date(now.getTime() + policy.leaseMs);

/** A worker seen after this is live (it heartbeats well within a lease). */
export const liveSince = (now: Date, policy: RunPolicy) => new Date(now.getTime() - policy.leaseMs);

/** Workers not seen since this are forgotten by the registry. */
export const forgottenBefore = (now: Date, policy: RunPolicy) =>
  new Date(liveSince(now, policy).getTime() - FORGET_WORKERS_AFTER_MS);

/**
 * Runs claimed before this are over RUN_MAX_DURATION_MINUTES by a lease: their worker should have
 * stopped them (undefined: no maximum).
 */
export function overdueClaimedBefore(now: Date, policy: RunPolicy): Date | undefined {
  if (!policy.maxDurationMinutes) return undefined;
  return new Date(now.getTime() - policy.maxDurationMinutes * policy.minuteMs - policy.leaseMs);
}

/** A run's idle limit: its own `idle_timeout_minutes`, else the service's default (0: none). */
export function idleMinutes(config: Record<string, unknown>, policy: RunPolicy): number {
  return typeof config.idle_timeout_minutes === 'number'
    ? config.idle_timeout_minutes
    : policy.idleTimeoutMinutes;
}

/**
 * How a harness that exited by itself ends its run: exit 0 succeeds, anything else fails with the
 * reason its failed result gave (a built-in harness says what to do), else with its last lines.
 */
function endOf(outcome: Outcome): ['succeed' | 'fail', StatusMessage] {
  if (outcome.environmentFailure)
    return ['fail', ended('environment_setup_failed', outcome.environmentFailure)];
  if (outcome.exitCode === 0)
    return ['succeed', { message: outcome.result?.message || 'The agent finished' }];
  if (outcome.result?.status === 'failed' && outcome.result.message)
    return ['fail', ended('agent_failed', outcome.result.message)];
  const tail = outcome.lastLines.slice(-LAST_LINES_IN_MESSAGE).join('\n');
  const how =
    outcome.exitCode === null ? `was killed by ${outcome.signal}` : `exited with status ${outcome.exitCode}`;
  return ['fail', ended('agent_failed', `The agent ${how}${tail ? `:\n${tail}` : ''}`)];
}

/**
 * The usual end: a harness that exited by itself ends its run from INPROGRESS, or from CLAIMED when
 * the whole run fitted in one report (`startedMsAgo` set: its start was never reported).
 */
export function harnessEnd(outcome: Outcome): RunEnd & { from: RunState } {
  const [event, statusMessage] = endOf(outcome);
  return outcome.startedMsAgo !== undefined
    ? { from: 'CLAIMED', path: ['start', event], statusMessage }
    : { from: 'INPROGRESS', path: [event], statusMessage };
}

/**
 * The end of a run its worker still holds in `state` when the harness is gone: a shutdown loses it
 * (ERROR, retryable); an idle or overlong harness the worker stopped fails it; else the exit decides.
 * A BLOCKED or CLAIMED run passes through INPROGRESS on the way (it ran).
 */
export function workerEnd(
  run: { state: RunState; agentConfig: Record<string, unknown> },
  outcome: Outcome,
  workerId: string,
  policy: RunPolicy,
): RunEnd {
  if (outcome.stoppedBy === 'shutdown')
    return {
      path: ['lose'],
      statusMessage: ended('worker_lost', `The worker ${workerId} shut down while running this run`, true),
    };
  const ran: RunEvent[] = run.state === 'BLOCKED' ? ['resume'] : run.state === 'CLAIMED' ? ['start'] : [];
  if (outcome.stoppedBy === 'idle') {
    const source =
      typeof run.agentConfig.idle_timeout_minutes === 'number'
        ? "the run's idle_timeout_minutes"
        : 'RUN_IDLE_TIMEOUT_MINUTES, the default when the run sets no idle_timeout_minutes';
    return {
      path: [...ran, 'fail'],
      statusMessage: ended(
        'idle_timeout',
        `The agent was idle (no output, no input) for longer than idle_timeout_minutes (${idleMinutes(run.agentConfig, policy)} minute(s): ${source}) and was stopped`,
      ),
    };
  }
  if (outcome.stoppedBy === 'max_duration')
    return { path: [...ran, 'fail'], statusMessage: overDuration(policy, 'its worker stopped it') };
  const [event, statusMessage] = endOf(outcome);
  return { path: [...ran, event], statusMessage };
}

/** A run over RUN_MAX_DURATION_MINUTES whose worker did not stop it: FAILED, through INPROGRESS. */
export function overdueEnd(state: RunState, policy: RunPolicy): RunEnd {
  return {
    path: state === 'BLOCKED' ? ['resume', 'fail'] : ['fail'],
    statusMessage: overDuration(policy, 'its worker did not stop it, so the service ended the run'),
  };
}

function overDuration(policy: RunPolicy, how: string): StatusMessage {
  return ended(
    'max_duration',
    `The run reached the maximum run duration of ${policy.maxDurationMinutes} minute(s) (RUN_MAX_DURATION_MINUTES) and was stopped; ${how}`,
  );
}

/** A held run whose lease lapsed: its worker is gone, so the run was lost (ERROR, retryable). */
export function lapsedLeaseEnd(run: { lease_owner: string; lease_expires_at: Date }): RunEnd {
  return {
    path: ['lose'],
    statusMessage: ended(
      'lease_expired',
      `The worker ${run.lease_owner} stopped renewing its lease (expired ${run.lease_expires_at.toISOString()}); the run was lost`,
      true,
    ),
  };
}

/** A held run whose worker a restarted worker on its machine found dead: lost at once (ERROR, retryable). */
export function lostWorkerEnd(run: { lease_owner: string }): RunEnd {
  return {
    path: ['lose'],
    statusMessage: ended(
      'worker_lost',
      `The worker ${run.lease_owner} died while running this run (found gone when a worker restarted on its machine); its harness died with it, so the run was lost`,
      true,
    ),
  };
}
