import { RUN_STATE_VALUES, TERMINAL_RUN_STATE_VALUES } from '../contract/generated.js';

/**
 * The run state machine of docs/run-api.md ("Run states"), as data. Every state change in the service goes through
 * `nextState`; an event that is not allowed from the current state is a programming error
 * (IllegalTransition), so callers check `canApply` first where the caller's input decides.
 *
 * The states and the terminal ones are the API's (schemas/api/run-state, terminal-run-state).
 */
export const RUN_STATES = RUN_STATE_VALUES;
export type RunState = (typeof RUN_STATES)[number];

export const TERMINAL_STATES: ReadonlySet<RunState> = new Set(TERMINAL_RUN_STATE_VALUES);

export type RunEvent =
  /** QUEUED → PENDING: the run is being prepared before it can be claimed. */
  | 'prepare'
  /** PENDING → QUEUED: prepared. */
  | 'ready'
  /** A worker claims it. */
  | 'claim'
  /** The agent process started. */
  | 'start'
  | 'succeed'
  | 'fail'
  /** The agent asks for input. */
  | 'block'
  /** A follow-up reaches a blocked agent. */
  | 'resume'
  /** The worker was lost or its lease expired (the platform failed: ERROR, retryable). */
  | 'lose'
  | 'cancel'
  /** A follow-up to an ended run: it continues in the same conversation. */
  | 'continue';

const TRANSITIONS: Record<RunEvent, Partial<Record<RunState, RunState>>> = {
  prepare: { QUEUED: 'PENDING' },
  ready: { PENDING: 'QUEUED' },
  claim: { QUEUED: 'CLAIMED' },
  start: { CLAIMED: 'INPROGRESS' },
  succeed: { INPROGRESS: 'SUCCEEDED' },
  fail: { INPROGRESS: 'FAILED', CLAIMED: 'FAILED' },
  block: { INPROGRESS: 'BLOCKED' },
  resume: { BLOCKED: 'INPROGRESS' },
  lose: { CLAIMED: 'ERROR', INPROGRESS: 'ERROR', BLOCKED: 'ERROR' },
  cancel: { QUEUED: 'CANCELLED', CLAIMED: 'CANCELLED', INPROGRESS: 'CANCELLED', BLOCKED: 'CANCELLED' },
  continue: { SUCCEEDED: 'QUEUED', FAILED: 'QUEUED', ERROR: 'QUEUED', CANCELLED: 'QUEUED' },
};

export class IllegalTransition extends Error {
  constructor(
    readonly from: RunState,
    readonly event: RunEvent,
  ) {
    super(`run state machine: '${event}' is not allowed from ${from}`);
  }
}

export function canApply(from: RunState, event: RunEvent): boolean {
  return TRANSITIONS[event][from] !== undefined;
}

export function nextState(from: RunState, event: RunEvent): RunState {
  const to = TRANSITIONS[event][from];
  if (!to) throw new IllegalTransition(from, event);
  return to;
}

/** The states from which `event` may be applied: used to guard UPDATEs (`WHERE state = ANY(...)`). */
export function statesAllowing(event: RunEvent): RunState[] {
  return Object.keys(TRANSITIONS[event]) as RunState[];
}

/**
 * States as an SQL list (`'QUEUED', 'CLAIMED'`), for a statement's text rather than a parameter: a
 * prepared statement's generic plan cannot match a parameter against a partial index on state
 * (runs_queue, runs_leases), so with one it read every run. They are constants of the state
 * machine, never input.
 */
export function sqlStates(states: readonly RunState[]): string {
  return states.map((s) => `'${s}'`).join(', ');
}

/**
 * Every state but these, as sqlStates: for `state NOT IN (…)` where runs are found by id and their
 * state only checked. Said as `state IN (these)`, the check matches the partial indexes on state
 * (runs_queue_team…), and a planner whose last vacuum found the queue empty (a calm spell) takes
 * those indexes for empty still and reads every team's queued runs rather than the few by their ids.
 */
export function sqlStatesOtherThan(states: readonly RunState[]): string {
  return sqlStates(RUN_STATES.filter((s) => !states.includes(s)));
}

export function isTerminal(state: RunState): boolean {
  return TERMINAL_STATES.has(state);
}
