import { describe, expect, it } from 'vitest';
import { nextState, type RunEvent, type RunState } from '../../runs/run-state.js';
import type { Outcome } from '../protocol/assignment.js';
import * as decide from './run-decisions.js';
import type { RunPolicy } from './run-decisions.js';

const policy: RunPolicy = {
  leaseMs: 30_000,
  idleTimeoutMinutes: 15,
  maxDurationMinutes: 60,
  minuteMs: 60_000,
  transcriptBudget: { bytes: 1 << 20, events: 1000 },
};
const now = new Date('2026-01-01T12:00:00Z');
const exited = (exitCode: number | null, more: Partial<Outcome> = {}): Outcome => ({
  exitCode,
  signal: null,
  lastLines: [],
  ...more,
});
/** Where a path of events leads from `from`, by the state machine (throws on an illegal step). */
const walk = (from: RunState, path: RunEvent[]) => path.reduce(nextState, from);

describe('a harness that exited by itself', () => {
  it('succeeds on exit 0 with the result message, from INPROGRESS', () => {
    const end = decide.harnessEnd(
      exited(0, { result: { type: 'result', status: 'succeeded', message: 'done' } }),
    );
    expect(end).toEqual({ from: 'INPROGRESS', path: ['succeed'], statusMessage: { message: 'done' } });
  });

  it('starts and ends in one step when its start was never reported (a short run)', () => {
    const end = decide.harnessEnd(exited(0, { startedMsAgo: 40 }));
    expect(end.from).toBe('CLAIMED');
    expect(walk(end.from, end.path)).toBe('SUCCEEDED');
    expect(end.statusMessage.message).toBe('The agent finished');
  });

  it('fails on another exit with the last five lines, or the signal that killed it', () => {
    const lines = ['1', '2', '3', '4', '5', '6'];
    expect(decide.harnessEnd(exited(3, { lastLines: lines })).statusMessage).toEqual({
      message: 'The agent exited with status 3:\n2\n3\n4\n5\n6',
      reason: 'agent_failed',
    });
    const killed = decide.harnessEnd(exited(null, { signal: 'SIGKILL' }));
    expect(walk(killed.from, killed.path)).toBe('FAILED');
    expect(killed.statusMessage.message).toBe('The agent was killed by SIGKILL');
  });
});

describe('a run its worker stopped, as the worker still holds it', () => {
  it('is lost (ERROR, retryable) when the worker shut down, whatever its state', () => {
    for (const state of ['CLAIMED', 'INPROGRESS', 'BLOCKED'] as RunState[]) {
      const end = decide.workerEnd(
        { state, agentConfig: {} },
        exited(null, { stoppedBy: 'shutdown' }),
        'w1',
        policy,
      );
      expect(walk(state, end.path)).toBe('ERROR');
      expect(end.statusMessage).toMatchObject({
        error_code: 'resource_unavailable',
        reason: 'worker_lost',
        retryable: true,
      });
      expect(end.statusMessage.message).toContain('w1');
    }
  });

  it('fails as idle through INPROGRESS, naming whose limit it was', () => {
    const own = decide.workerEnd(
      { state: 'BLOCKED', agentConfig: { idle_timeout_minutes: 5 } },
      exited(null, { stoppedBy: 'idle' }),
      'w1',
      policy,
    );
    expect(own.path).toEqual(['resume', 'fail']);
    expect(own.statusMessage).toMatchObject({ reason: 'idle_timeout' });
    expect(own.statusMessage).not.toHaveProperty('error_code');
    expect(own.statusMessage.message).toContain("(5 minute(s): the run's idle_timeout_minutes)");
    const dflt = decide.workerEnd(
      { state: 'CLAIMED', agentConfig: {} },
      exited(null, { stoppedBy: 'idle' }),
      'w1',
      policy,
    );
    expect(dflt.path).toEqual(['start', 'fail']);
    expect(dflt.statusMessage.message).toContain('(15 minute(s): RUN_IDLE_TIMEOUT_MINUTES');
  });

  it('fails as max_duration when it ran too long, else the exit decides', () => {
    const long = decide.workerEnd(
      { state: 'INPROGRESS', agentConfig: {} },
      exited(null, { stoppedBy: 'max_duration' }),
      'w',
      policy,
    );
    expect(long.path).toEqual(['fail']);
    expect(long.statusMessage).toMatchObject({ error_code: 'budget_exceeded', reason: 'max_duration' });
    expect(long.statusMessage.message).toContain('60 minute(s)');
    const ok = decide.workerEnd(
      { state: 'BLOCKED', agentConfig: {} },
      exited(0, { stoppedBy: 'cancel' }),
      'w',
      policy,
    );
    expect(walk('BLOCKED', ok.path)).toBe('SUCCEEDED');
  });
});

describe('runs the service takes from their workers', () => {
  it('ends an overdue run as FAILED from any held state', () => {
    for (const state of ['CLAIMED', 'INPROGRESS', 'BLOCKED'] as RunState[]) {
      expect(walk(state, decide.overdueEnd(state, policy).path)).toBe('FAILED');
    }
    expect(decide.overdueEnd('INPROGRESS', policy).statusMessage.message).toContain(
      'the service ended the run',
    );
  });

  it('loses a run whose lease lapsed or whose worker died (ERROR, retryable)', () => {
    const lapsed = decide.lapsedLeaseEnd({ lease_owner: 't/h/w1', lease_expires_at: now });
    expect(walk('BLOCKED', lapsed.path)).toBe('ERROR');
    expect(lapsed.statusMessage).toEqual({
      message: `The worker t/h/w1 stopped renewing its lease (expired ${now.toISOString()}); the run was lost`,
      reason: 'lease_expired',
      error_code: 'resource_unavailable',
      retryable: true,
    });
    expect(decide.lostWorkerEnd({ lease_owner: 't/h/w2' }).statusMessage).toMatchObject({
      error_code: 'resource_unavailable',
      reason: 'worker_lost',
      retryable: true,
    });
  });
});

describe('times', () => {
  it('leases last leaseMs; a worker is live for a lease after it was seen; forgotten an hour later', () => {
    expect(decide.leaseEnd(now, policy).toISOString()).toBe('2026-01-01T12:00:30.000Z');
    expect(decide.liveSince(now, policy).toISOString()).toBe('2026-01-01T11:59:30.000Z');
    expect(decide.forgottenBefore(now, policy).toISOString()).toBe('2026-01-01T10:59:30.000Z');
  });

  it('finds overdue runs a lease after the maximum duration, and none without a maximum', () => {
    expect(decide.overdueClaimedBefore(now, policy)?.toISOString()).toBe('2026-01-01T10:59:30.000Z');
    expect(decide.overdueClaimedBefore(now, { ...policy, maxDurationMinutes: 0 })).toBeUndefined();
  });

  it("takes the worker's start measure unless it is negative or over a day", () => {
    expect(decide.startedAt(now, 1500).toISOString()).toBe('2026-01-01T11:59:58.500Z');
    expect(decide.startedAt(now, -5)).toEqual(now);
    expect(decide.startedAt(now, 86_400_000)).toEqual(now);
  });

  it("uses the run's own idle limit, else the policy's", () => {
    expect(decide.idleMinutes({ idle_timeout_minutes: 2 }, policy)).toBe(2);
    expect(decide.idleMinutes({}, policy)).toBe(15);
    expect(decide.isHeld('BLOCKED') && !decide.isHeld('QUEUED')).toBe(true);
  });
});
