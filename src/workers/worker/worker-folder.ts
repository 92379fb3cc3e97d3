import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

const RECORD = 'worker.json';

interface WorkerRecord {
  worker_id: string;
  /** Where the worker reports (the API and host it serves): only a worker of the same scope takes over. */
  scope: string;
  hostname: string;
  pid: number;
}

export interface WorkerFolder {
  /** `<root>/<worker id>`: this worker's run workspaces go here. */
  dir: string;
  /** Workers of the same scope that ran on this machine and died without cleaning up. */
  predecessors: Array<{ workerId: string; dir: string }>;
}

/**
 * Makes this worker's folder under the workspace root, with a record of who it is, and finds the
 * folders of earlier workers of the same scope on this machine whose process is gone: a worker
 * killed abruptly (SIGKILL, OOM, a crash) leaves its folder behind, and the next one to start tells
 * the service at once that the dead worker's runs are lost (rather than when their leases lapse).
 * Records from other machines (a shared disk) are left alone: their pids mean nothing here.
 */
export function openWorkerFolder(root: string, workerId: string, scope: string): WorkerFolder {
  const dir = join(root, workerId.replace(/[^A-Za-z0-9._-]/g, '_'));
  // Harnesses pass through it to their workspaces; none may list the others'.
  mkdirSync(dir, { recursive: true, mode: 0o711 });
  chmodSync(dir, 0o711);
  const record: WorkerRecord = { worker_id: workerId, scope, hostname: hostname(), pid: process.pid };
  writeFileSync(join(dir, RECORD), JSON.stringify(record), { mode: 0o600 });
  const predecessors: WorkerFolder['predecessors'] = [];
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const other = join(root, entry.name);
    if (!entry.isDirectory() || other === dir) continue;
    const r = readRecord(other);
    if (r && r.scope === scope && r.hostname === record.hostname && !alive(r.pid))
      predecessors.push({ workerId: r.worker_id, dir: other });
  }
  return { dir, predecessors };
}

export function removeWorkerFolder(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

function readRecord(dir: string): WorkerRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(join(dir, RECORD), 'utf8')) as Partial<WorkerRecord>;
    return typeof r.worker_id === 'string' && typeof r.pid === 'number' ? (r as WorkerRecord) : undefined;
  } catch {
    return undefined; // not a worker folder (or one being written)
  }
}

/** Our own pid in a record is an earlier life of a restarted container, not us. */
function alive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
