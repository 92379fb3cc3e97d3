import { spawn, type ChildProcess } from 'node:child_process';
import { CLI } from './cli.js';

/** `factoryd serve` as a child process: what a fault test kills things under and watches live on. */
export interface ServeProcess {
  child: ChildProcess;
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  /** The admin key a first start printed; empty on a later start. */
  adminKey: string;
  /** Everything it wrote so far (stdout and stderr). */
  output(): string;
  /** Its exit code once it has exited. */
  exited: Promise<number | null>;
  /** SIGTERM, and resolves with its exit code once it has exited. */
  stop(): Promise<number | null>;
}

/** The banner `serve` prints when it is up, to its closing rule (a first start's credentials come before it). */
const BANNER = /factoryd is up: API (http:\/\/[^\s/]+)\/api\/v1[^\n]*\n[\s\S]*?\n─{78}\n/;

/**
 * Starts `node dist/cli/main.js serve` with `env` (PORT 0) and resolves, in the very output event that
 * completes its banner, once it is up. It inherits this process's environment, with HOST 127.0.0.1
 * and LOG_LEVEL silent unless `env` says otherwise; `bareEnvironment`: only PATH and HOME (what a
 * person's shell may well have), so nothing of the tests' setup reaches it. `checkout`: another
 * checkout's binary, started in its folder (its DATA_DIR `./var`), on its embedded database. `cwd`:
 * the folder it starts in. `args`: after `serve` (`['--role', 'api']`).
 */
export function startServeProcess(
  env: Record<string, string>,
  opts: { checkout?: string; cwd?: string; bareEnvironment?: boolean; args?: string[] } = {},
): Promise<ServeProcess> {
  const base: NodeJS.ProcessEnv = opts.bareEnvironment
    ? { PATH: process.env.PATH, HOME: process.env.HOME }
    : { ...process.env, HOST: '127.0.0.1', LOG_LEVEL: 'silent' };
  if (opts.checkout) delete base.DATABASE_URL;
  const child = spawn(
    process.execPath,
    [opts.checkout ? `${opts.checkout}/dist/cli/main.js` : CLI, 'serve', ...(opts.args ?? [])],
    {
      cwd: opts.cwd ?? opts.checkout,
      env: { ...base, PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const up = BANNER.exec(out);
      if (up)
        resolve({
          child,
          url: up[1]!,
          adminKey: /export FACTORYD_API_KEY=(\S+)/.exec(out)?.[1] ?? '',
          output: () => out,
          exited,
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
