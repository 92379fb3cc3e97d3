import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './cli.js';

/** `factoryd serve` as a child process: what a fault test kills things under and watches live on. */
export interface ServeProcess {
  child: ChildProcess;
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** The admin key the first start printed. */
  adminKey: string;
  /** Everything it wrote so far (stdout and stderr). */
  output(): string;
  /** SIGTERM, and resolves with its exit code once it has exited. */
  stop(): Promise<number | null>;
}

/**
 * Starts `node dist/cli/main.js serve` with `env` and resolves once it says it is up; `checkout`:
 * another checkout's binary, started in its folder (its DATA_DIR `./var`), on its embedded database.
 */
export function startServeProcess(env: Record<string, string>, checkout?: string): Promise<ServeProcess> {
  const base = { ...process.env };
  if (checkout) delete base.DATABASE_URL;
  const child = spawn(process.execPath, [checkout ? `${checkout}/dist/cli/main.js` : CLI, 'serve'], {
    cwd: checkout,
    env: { ...base, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const up = /API (http:\/\/[^\s/]+)\/api\/v1/.exec(out);
      const key = /export FACTORYD_API_KEY=(\S+)/.exec(out);
      // The banner's closing rule after the key: log lines may follow it in the same chunk (so the
      // output need not end with the banner), and none comes inside it.
      if (up && key && /\n─{10,}\n/.test(out.slice(key.index)))
        resolve({
          child,
          url: up[1]!,
          adminKey: key[1]!,
          output: () => out,
          stop: () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
            return exited;
          },
        });
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before it was up: ${out}`)));
  });
}

/** One HTTP answer as a fault test records it. */
export interface Answer {
  what: string;
  status: number;
  retryAfter: string | null;
  body: any;
}

/** fetch, JSON in and out; a broken connection is status 0 (the process behind it died). */
export async function request(
  what: string,
  url: string,
  init: { method?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  try {
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      headers: {
        ...(init.key ? { authorization: `Bearer ${init.key}` } : {}),
        ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...init.headers,
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { what, status: res.status, retryAfter: res.headers.get('retry-after'), body };
  } catch {
    return { what, status: 0, retryAfter: null, body: undefined };
  }
}

/** The answers a fault may cause: any 2xx or 4xx, or a 503 that says when to retry. Never a 500 or a dead socket. */
export function unexpectedAnswers(answers: Answer[]): Answer[] {
  return answers.filter(
    (a) => !(a.status >= 200 && a.status < 500) && !(a.status === 503 && a.retryAfter !== null),
  );
}
