import type { Assignment, Control, Outcome, WorkerBackend } from '../protocol/assignment.js';
import type { HarnessEvent } from '../protocol/harness-protocol.js';

/**
 * A worker backend that says, in a line each, when a run is taken and how its harness ended: what a
 * person running `factoryd worker` in a terminal watches (the service's own workers log to the API's
 * log instead). Everything else passes through.
 */
export function narratedBackend(backend: WorkerBackend, say: (line: string) => void): WorkerBackend {
  return {
    workerId: backend.workerId,
    scope: backend.scope,
    async claim(max: number): Promise<Assignment[]> {
      const claimed = await backend.claim(max);
      for (const a of claimed)
        say(
          `run ${a.run_id}: taken${a.execution > 1 ? ` (execution ${a.execution})` : ''}, its harness starting`,
        );
      return claimed;
    },
    waitForWork: (ms: number) => backend.waitForWork(ms),
    record: (runId: string, execution: number, events: HarnessEvent[], startedMsAgo?: number) =>
      backend.record(runId, execution, events, startedMsAgo),
    control: (runId: string): Promise<Control> => backend.control(runId),
    heartbeat: (runIds: string[]) => backend.heartbeat(runIds),
    async finish(runId: string, execution: number, outcome: Outcome): Promise<void> {
      await backend.finish(runId, execution, outcome);
      say(`run ${runId}: ${howItEnded(outcome)}`);
    },
    lost: (workerIds: string[]) => backend.lost(workerIds),
    close: () => backend.close(),
  };
}

const STOPPED: Record<NonNullable<Outcome['stoppedBy']>, string> = {
  cancel: 'cancelled',
  idle: 'idle past its limit',
  max_duration: 'past its longest run time',
  shutdown: 'this worker is stopping',
};

/** The end as the worker saw it (the service decides the run's state from it). */
function howItEnded(o: Outcome): string {
  if (o.environmentFailure) return `ended before its agent started: ${shown(o.environmentFailure)}`;
  if (o.stoppedBy) return `stopped: ${STOPPED[o.stoppedBy]}`;
  const exit = o.exitCode !== null ? `exit ${o.exitCode}` : `signal ${o.signal ?? 'unknown'}`;
  return `harness ended (${exit})${o.result ? `, ${o.result.status}: ${shown(o.result.message)}` : ''}`;
}

/** What a harness wrote, fit for one terminal line: no control characters (escapes), 200 at most. */
function shown(text: string): string {
  // eslint-disable-next-line no-control-regex
  const plain = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  return plain.length > 200 ? `${plain.slice(0, 199)}…` : plain;
}
