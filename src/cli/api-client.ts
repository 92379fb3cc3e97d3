import { dataDirOf } from '../config/config.js';
import { findLocalService, serviceRootOf } from './local-service.js';

/**
 * The CLI's way to the HTTP API, for commands that act as an API caller would (runs, webhooks).
 * `--api` / FACTORYD_API_URL (the service's root URL; default: the `factoryd serve` running on this
 * DATA_DIR, else http://127.0.0.1:$PORT) and `--api-key` / FACTORYD_API_KEY.
 */
export interface ApiOptions {
  api?: string;
  apiKey?: string;
  team?: string;
}

/** Runs started with this user agent are recorded with source CLI. */
export const CLI_USER_AGENT = 'factoryd-cli/1';

export class ApiCallFailed extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(`${status} ${code}: ${detail}`);
  }
}

export class ApiClient {
  readonly base: string;
  private readonly key: string;

  constructor(private readonly opts: ApiOptions) {
    this.base = serviceRoot(opts.api);
    const key = opts.apiKey ?? process.env.FACTORYD_API_KEY;
    if (!key)
      throw new Error('no API key: pass --api-key or set FACTORYD_API_KEY (see `factoryd api-keys create`)');
    this.key = key;
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          'user-agent': CLI_USER_AGENT,
          ...(this.opts.team ? { 'x-team-uid': this.opts.team } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new Error(
        `cannot reach factoryd at ${this.base} (${(err as Error).cause ?? (err as Error).message}); is it running? ` +
          '(one started in this folder is found by itself; elsewhere give --api URL or FACTORYD_API_URL)',
        { cause: err },
      );
    }
    const text = await res.text();
    const parsed: unknown = text ? JSON.parse(text) : undefined;
    if (!res.ok) {
      const p = (parsed ?? {}) as { error?: string; detail?: string; title?: string };
      throw new ApiCallFailed(res.status, p.error ?? 'error', p.detail ?? p.title ?? res.statusText);
    }
    return parsed as T;
  }
}

/**
 * The service's root URL: --api, FACTORYD_API_URL, the `factoryd serve` recorded under DATA_DIR (found
 * on whatever port it listens), or http://127.0.0.1:$PORT.
 */
export function serviceRoot(api?: string): string {
  const given = api || process.env.FACTORYD_API_URL;
  if (given) return serviceRootOf(given);
  return findLocalService(dataDirOf())?.url ?? `http://127.0.0.1:${process.env.PORT || 8080}`;
}

export const API_OPTION_HELP =
  'the service’s root URL, e.g. https://factoryd.example.com (a trailing /api/v1 is accepted); env FACTORYD_API_URL';

/** Adds --api, --api-key and --team to a command that talks to the API. */
export function apiOptions<T extends { option(flags: string, description: string): T }>(cmd: T): T {
  return cmd
    .option(
      '--api <url>',
      `${API_OPTION_HELP}; default: the factoryd serve running in this folder (DATA_DIR), else http://127.0.0.1:$PORT`,
    )
    .option('--api-key <key>', 'API key (env FACTORYD_API_KEY)')
    .option('--team <uid>', 'team uid, when the key belongs to several (X-Team-Uid)');
}
