import type { Assignment, Control, Outcome, WorkerBackend } from './assignment.js';
import type { HarnessEvent } from './harness-protocol.js';
import type { RunWakeups } from './run-wakeups.js';
import type { WorkerIdentity, WorkerRunsService } from './worker-runs.service.js';

/** A worker beside the database (service-hosted): WorkerRunsService called in process. */
export class DirectBackend implements WorkerBackend {
  constructor(
    private readonly service: WorkerRunsService,
    private readonly worker: WorkerIdentity,
    private readonly wakeups: RunWakeups,
  ) {}

  /** The wake-up generation the last claim saw: a signal after it means look again at once. */
  private seen = 0;

  get workerId(): string {
    return this.worker.id;
  }
  readonly scope = 'service-hosted';

  claim(max: number): Promise<Assignment[]> {
    this.seen = this.wakeups.generation;
    return this.service.claim(this.worker, max);
  }
  waitForWork(ms: number): Promise<void> {
    return this.wakeups.next(ms, this.seen);
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
  finish(runId: string, execution: number, outcome: Outcome): Promise<void> {
    return this.service.finish(this.worker, runId, execution, outcome);
  }
  async lost(workerIds: string[]): Promise<void> {
    await this.service.lost(this.worker, workerIds);
  }
  async close(): Promise<void> {
    await this.service.unregister(this.worker).catch(() => undefined);
  }
}
