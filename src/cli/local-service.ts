import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What `factoryd serve` records under DATA_DIR while it runs, so that the CLI in another terminal
 * (same folder, same DATA_DIR) finds it on whatever port it listens: `var/service.json`.
 */
export interface LocalService {
  /** The service's root URL, e.g. http://127.0.0.1:9000 (the API is under /api/v1). */
  url: string;
  pid: number;
  /** Where its database is: the embedded server under DATA_DIR, or DATABASE_URL. */
  database: 'embedded' | 'DATABASE_URL';
}

function serviceFileOf(dataDir: string): string {
  return join(dataDir, 'service.json');
}

/** Records the running service; the returned function removes the record (at a clean stop). */
export function recordLocalService(dataDir: string, service: LocalService): () => void {
  const file = serviceFileOf(dataDir);
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${JSON.stringify(service, null, 2)}\n`);
  return () => {
    // Only our own record: another serve may have started on this DATA_DIR since.
    if (findLocalService(dataDir)?.pid === service.pid) rmSync(file, { force: true });
  };
}

/** The service recorded under DATA_DIR, if its process still runs (a killed one leaves its file behind). */
export function findLocalService(dataDir: string): LocalService | undefined {
  let recorded: LocalService;
  try {
    recorded = JSON.parse(readFileSync(serviceFileOf(dataDir), 'utf8')) as LocalService;
  } catch {
    return undefined;
  }
  if (typeof recorded.url !== 'string' || !Number.isInteger(recorded.pid)) return undefined;
  return processRuns(recorded.pid) ? recorded : undefined;
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it runs, as another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * `--api` means one thing everywhere: the service's root URL. The API's own URL (…/api/v1), which the
 * official clients take as their base URL, is accepted too and means the same.
 */
export function serviceRootOf(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--api / FACTORYD_API_URL: "${url}" is not a URL (e.g. http://127.0.0.1:8080)`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new Error(`--api / FACTORYD_API_URL: "${url}" is not an http(s) URL`);
  return url.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
}
