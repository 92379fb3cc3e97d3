import type { Assignment, Control, Outcome, WorkerBackend } from '../protocol/assignment.js';
import type { HarnessEvent } from '../protocol/harness-protocol.js';
import type { RunWakeups } from '../queue/run-wakeups.js';
import type { WorkerIdentity, WorkerRunsService } from '../queue/worker-runs.service.js';

/** A worker beside the database (service-hosted): WorkerRunsService called in process. */
export class DirectBackend implements WorkerBackend {
  constructor(
    private readonly service: WorkerRunsService,
    private readonly worker: WorkerIdentity,
    private readonly wakeups: RunWakeups,
    /** Asked before each claim: false, and this worker takes nothing this time (SingleTeamGate). */
    private readonly mayClaim: () => Promise<boolean> = () => Promise.resolve(true),
  ) {}

  /** The wake-up generation the last claim saw: a signal after it means look again at once. */
  private seen = 0;
  /** Ends the current waitForWork. */
  private runEnded = () => {};

  get workerId(): string {
    return this.worker.id;
  }
  readonly scope = 'service-hosted';

  async claim(max: number): Promise<Assignment[]> {
    this.seen = this.wakeups.generation;
    if (!(await this.mayClaim())) return [];
    return this.service.claim(this.worker, max);
  }
  /**
   * Waits for a wake-up, or for one of this worker's own runs to end: a team held back by its share
   * of the slots may then have a turn, and no NOTIFY says so.
   */
  waitForWork(ms: number): Promise<void> {
    const ended = new AbortController();
    this.runEnded = () => ended.abort();
    return this.wakeups.next(ms, this.seen, ended.signal);
  }
  record(runId: string, execution: number, events: HarnessEvent[], startedMsAgo?: number): Promise<void> {
    return this.service.record(this.worker, runId, execution, events, startedMsAgo);
  }
  control(runId: string): Promise<Control> {
    return this.service.control(this.worker, runId);
  }
  heartbeat(runIds: string[]): Promise<void> {
    return this.service.heartbeat(this.worker, runIds);
  }
  async finish(runId: string, execution: number, outcome: Outcome): Promise<void> {
    await this.service.finish(this.worker, runId, execution, outcome);
    this.runEnded();
  }
  async lost(workerIds: string[]): Promise<void> {
    await this.service.lost(this.worker, workerIds);
  }
  async close(): Promise<void> {
    await this.service.unregister(this.worker).catch(() => undefined);
  }
}
