import { retry } from '../../common/retry.js';
import type { Assignment, Control, Outcome, WorkerBackend } from '../protocol/assignment.js';
import type { HarnessEvent } from '../protocol/harness-protocol.js';
import type { WorkerHarness } from '../queue/workers.repository.js';

const LONG_POLL_SECONDS = 20;
/** How long a report (start, events, end) is retried while the API is unreachable. */
const REPORT_RETRY_MS = 5 * 60_000;

/**
 * A self-hosted worker's way to the service: it connects out over HTTP(S) to the worker API with
 * its API key. Claims long-poll; reports are retried while the API restarts.
 */
export class HttpBackend implements WorkerBackend {
  private readonly abort = new AbortController();

  constructor(
    private readonly api: string,
    private readonly apiKey: string,
    readonly workerId: string,
    private readonly workerHost: string,
    /** The harnesses this machine can run: the service hands it only runs of these. */
    private readonly harnesses: WorkerHarness[] = [{ type: 'oz' }],
  ) {}

  get scope(): string {
    return `${this.api} ${this.workerHost}`;
  }

  /**
   * Checks the key before any work: the API answers with the host and team a worker key serves, or
   * refuses (RefusedError) a key that is no worker key for this host. Waits while the API is unreachable.
   */
  async connect(
    onUnreachable: (err: unknown) => void,
  ): Promise<{ worker_host: string; team: { name: string } }> {
    return retry(() => this.post('/agent/workers/connect', { harnesses: this.harnesses }), {
      pauses: { firstMs: 2000, maxMs: 2000 },
      again: (err) => !(err instanceof RefusedError) && !this.abort.signal.aborted,
      onRetry: onUnreachable,
    });
  }

  async claim(max: number): Promise<Assignment[]> {
    const res = await this.post<{ runs: Assignment[] }>('/agent/workers/claim', {
      max,
      wait_seconds: LONG_POLL_SECONDS,
      harnesses: this.harnesses,
    });
    return res.runs;
  }
  async waitForWork(): Promise<void> {
    /* the claim itself waited */
  }
  async record(
    runId: string,
    execution: number,
    events: HarnessEvent[],
    startedMsAgo?: number,
  ): Promise<void> {
    await this.report(`/agent/workers/runs/${runId}/events`, {
      execution,
      events,
      started_ms_ago: startedMsAgo,
    });
  }
  control(runId: string): Promise<Control> {
    return this.post<Control>(`/agent/workers/runs/${runId}/control`, {});
  }
  async heartbeat(runIds: string[]): Promise<void> {
    await this.post('/agent/workers/heartbeat', { run_ids: runIds, harnesses: this.harnesses });
  }
  async finish(runId: string, execution: number, outcome: Outcome): Promise<void> {
    await this.report(`/agent/workers/runs/${runId}/finish`, { execution, outcome });
  }
  async lost(workerIds: string[]): Promise<void> {
    await this.report('/agent/workers/lost', { worker_ids: workerIds });
  }
  async close(): Promise<void> {
    this.abort.abort();
  }

  private async report(path: string, body: Record<string, unknown>): Promise<void> {
    const deadline = Date.now() + REPORT_RETRY_MS;
    await retry(() => this.post(path, body), {
      pauses: { firstMs: 200, maxMs: 2000 },
      again: (err) => !(err instanceof RefusedError) && Date.now() <= deadline && !this.abort.signal.aborted,
    });
  }

  private async post<T = unknown>(path: string, body: Record<string, unknown>): Promise<T> {
    const res = await fetch(`${this.api}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ worker_id: this.workerId, worker_host: this.workerHost, ...body }),
      signal: this.abort.signal,
    });
    const text = await res.text();
    if (res.status >= 400 && res.status < 500 && res.status !== 429) throw new RefusedError(res.status, text);
    if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
    return (text ? JSON.parse(text) : {}) as T;
  }
}

/** The API answered and said no (bad key, bad request): retrying will not help. */
export class RefusedError extends Error {
  /** What the API said (a problem's `detail`). */
  readonly detail: string;

  constructor(
    readonly status: number,
    body: string,
  ) {
    const detail = problemDetail(body);
    super(`the API refused the worker (HTTP ${status}): ${detail}`);
    this.detail = detail;
  }
}

/** A problem+json body's `detail` (what a person can act on), else the body's start. */
function problemDetail(body: string): string {
  try {
    const detail = (JSON.parse(body) as { detail?: unknown }).detail;
    if (typeof detail === 'string') return detail;
  } catch {
    /* not JSON */
  }
  return body.slice(0, 300);
}
