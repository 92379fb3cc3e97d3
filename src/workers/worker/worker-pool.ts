import { Periodic } from '../../common/periodic.js';
import type { WorkerBackend } from '../protocol/assignment.js';
import { localBackend } from './harness-process.js';
import { RunExecution, type ExecutionOptions } from './run-execution.js';
import { openWorkerFolder, removeWorkerFolder } from './worker-folder.js';

export interface PoolOptions extends ExecutionOptions {
  concurrency: number;
  /** Lease renewal (and, for self-hosted workers, follow-up/cancel polling) interval. */
  heartbeatMs: number;
  /** The safety poll when no wake-up arrives. */
  pollMs: number;
  onError?: (err: unknown) => void;
}

/**
 * A worker: `concurrency` slots, each running one harness at a time. It claims when a slot is free
 * and the backend says there may be work (NOTIFY or long poll), renews the leases of what it holds,
 * and routes follow-ups and cancels to the live executions.
 */
export class WorkerPool {
  private readonly active = new Map<string, RunExecution>();
  /** Each live execution's end (its slot freed), for a stop to wait on. */
  private readonly endings = new Set<Promise<void>>();
  /** Executions whose harness ended but whose reports are still on their way. */
  private readonly reporting = new Set<Promise<void>>();
  private running = false;
  private loopDone?: Promise<void>;
  private slotFreed?: () => void;
  private heartbeats?: Periodic;
  /** Executions make their workspaces in this worker's folder under `opts.workspaceRoot`. */
  private executionOptions: ExecutionOptions;

  constructor(
    private readonly backend: WorkerBackend,
    private readonly opts: PoolOptions,
  ) {
    this.executionOptions = opts;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    const folder = openWorkerFolder(this.opts.workspaceRoot, this.backend.workerId, this.backend.scope);
    this.executionOptions = { ...this.opts, workspaceRoot: folder.dir };
    if (folder.predecessors.length) void this.takeOver(folder.predecessors);
    // Containers of workers that died with their launchers, and kept ones whose time is over.
    void (this.opts.backend ?? localBackend(this.opts.sandbox))
      .sweep()
      .catch((err) => this.opts.onError?.(err));
    this.loopDone = this.loop();
    // Kept alive: a self-hosted worker's process has nothing else that holds it open between polls.
    this.heartbeats = new Periodic({
      everyMs: this.opts.heartbeatMs,
      firstAfterMs: 0,
      run: () => this.heartbeat(),
      onError: (err) => this.opts.onError?.(err),
      keepAlive: true,
    }).start();
  }

  /** Follow-up, interrupt or cancel for a run: acted on if this worker holds it. */
  async control(runId: string): Promise<void> {
    const exec = this.active.get(runId);
    if (!exec) return;
    const c = await this.backend.control(runId);
    if (c.stop) return exec.stop('cancel');
    if (c.interrupt) exec.interrupt();
    for (const m of c.followups) exec.followup(m);
  }

  get activeRunIds(): string[] {
    return [...this.active.keys()];
  }

  /** Stops claiming; live harnesses are stopped and their runs end as ERROR (retryable). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const heartbeatsStopped = this.heartbeats?.stop(); // no new beat; one under way ends on its own
    this.slotFreed?.();
    await Promise.all([...this.active.values()].map((e) => e.stop('shutdown')));
    await Promise.all(this.endings);
    await Promise.all(this.reporting);
    await heartbeatsStopped;
    await this.backend.close(); // also ends a claim that is waiting (long poll)
    await this.loopDone;
    removeWorkerFolder(this.executionOptions.workspaceRoot);
    await this.opts.egress?.stop();
  }

  /**
   * Earlier workers that died on this machine (their folders are still here): their runs are
   * reported lost, since a harness dies with its worker and cannot be re-attached.
   */
  private async takeOver(predecessors: Array<{ workerId: string; dir: string }>): Promise<void> {
    try {
      await this.backend.lost(predecessors.map((p) => p.workerId));
    } catch (err) {
      this.opts.onError?.(err); // their leases lapse instead
    }
    for (const p of predecessors) removeWorkerFolder(p.dir);
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const free = this.opts.concurrency - this.active.size;
      if (free <= 0) {
        await new Promise<void>((r) => (this.slotFreed = r));
        continue;
      }
      let claimed;
      try {
        claimed = await this.backend.claim(free);
      } catch (err) {
        if (!this.running) break;
        this.opts.onError?.(err);
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      if (!this.running) {
        // Claimed while stopping: hand them back as lost rather than leave them held.
        for (const a of claimed)
          await this.backend
            .finish(a.run_id, a.execution, {
              stoppedBy: 'shutdown',
              exitCode: null,
              signal: null,
              lastLines: [],
            })
            .catch(() => undefined);
        break;
      }
      for (const a of claimed) this.launch(new RunExecution(a, this.backend, this.executionOptions));
      if (claimed.length === 0) await this.backend.waitForWork(this.opts.pollMs);
    }
  }

  private launch(exec: RunExecution): void {
    this.active.set(exec.runId, exec);
    const ended: Promise<void> = exec
      .run()
      .catch((err) => this.opts.onError?.(err))
      .finally(() => {
        const reported = exec.reported.finally(() => this.reporting.delete(reported));
        this.reporting.add(reported);
        this.active.delete(exec.runId);
        this.endings.delete(ended);
        this.slotFreed?.();
        this.slotFreed = undefined;
      });
    this.endings.add(ended);
  }

  private async heartbeat(): Promise<void> {
    await this.backend.heartbeat(this.activeRunIds);
    // Also the safety net for a missed control notification.
    await Promise.all(this.activeRunIds.map((id) => this.control(id)));
  }
}
