import { describe, expect, it } from 'vitest';
import {
  canApply,
  IllegalTransition,
  nextState,
  RUN_STATES,
  type RunEvent,
  type RunState,
} from './run-state.js';

// The contract's table (docs/run-api.md), written out independently of the implementation's map.
const ALLOWED: Array<[RunState, RunEvent, RunState]> = [
  ['QUEUED', 'claim', 'CLAIMED'],
  ['CLAIMED', 'start', 'INPROGRESS'],
  ['INPROGRESS', 'succeed', 'SUCCEEDED'],
  ['INPROGRESS', 'fail', 'FAILED'],
  ['CLAIMED', 'fail', 'FAILED'],
  ['CLAIMED', 'lose', 'ERROR'],
  ['INPROGRESS', 'lose', 'ERROR'],
  ['BLOCKED', 'lose', 'ERROR'],
  ['INPROGRESS', 'block', 'BLOCKED'],
  ['BLOCKED', 'resume', 'INPROGRESS'],
  ['QUEUED', 'cancel', 'CANCELLED'],
  ['CLAIMED', 'cancel', 'CANCELLED'],
  ['INPROGRESS', 'cancel', 'CANCELLED'],
  ['BLOCKED', 'cancel', 'CANCELLED'],
  ['SUCCEEDED', 'continue', 'QUEUED'],
  ['FAILED', 'continue', 'QUEUED'],
  ['ERROR', 'continue', 'QUEUED'],
  ['CANCELLED', 'continue', 'QUEUED'],
  ['QUEUED', 'prepare', 'PENDING'],
  ['PENDING', 'ready', 'QUEUED'],
];
const EVENTS: RunEvent[] = [
  'prepare',
  'ready',
  'claim',
  'start',
  'succeed',
  'fail',
  'block',
  'resume',
  'lose',
  'cancel',
  'continue',
];

describe('run state machine', () => {
  it('allows exactly the transitions of the contract', () => {
    for (const from of RUN_STATES) {
      for (const event of EVENTS) {
        const expected = ALLOWED.find(([f, e]) => f === from && e === event);
        expect(canApply(from, event), `${from} --${event}->`).toBe(expected !== undefined);
        if (expected) expect(nextState(from, event)).toBe(expected[2]);
        else expect(() => nextState(from, event)).toThrow(IllegalTransition);
      }
    }
  });

  it('cannot cancel a terminal or PENDING run', () => {
    for (const s of ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED', 'PENDING'] as RunState[]) {
      expect(canApply(s, 'cancel')).toBe(false);
    }
  });
});
