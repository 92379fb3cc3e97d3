import { dataDirOf } from '../config/config.js';
import { ApiOperations } from '../contract/client.js';
import type { Team } from '../contract/generated.js';
import { findLocalService, serviceRootOf } from './local-service.js';
import { cliCommand } from '../common/cli-command.js';

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
  /** --team as the X-Team-Uid the API takes, found once (a name is looked up among the key's teams). */
  private teamUid?: Promise<string | undefined>;

  constructor(private readonly opts: ApiOptions) {
    this.base = serviceRoot(opts.api);
    const key = opts.apiKey ?? process.env.FACTORYD_API_KEY;
    if (!key)
      throw new Error(
        `no API key: pass --api-key or set FACTORYD_API_KEY (see \`${cliCommand('api-keys create')}\`)`,
      );
    this.key = key;
  }

  /** The typed operations (src/contract): `client.api.call('getRun', { runId })`. */
  readonly api = new ApiOperations((method, path, body) => this.request(method, path, body));

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    this.teamUid ??=
      this.opts.team === undefined ? Promise.resolve(undefined) : this.findTeam(this.opts.team);
    return this.send<T>(method, path, body, await this.teamUid);
  }

  /**
   * `--team` takes a team's name or UID, as the commands on the database do; the API takes a UID
   * (X-Team-Uid). The key's teams say which: a key that may not list them (a worker key) sends the
   * value as it is.
   */
  private async findTeam(team: string): Promise<string> {
    let teams: Team[];
    try {
      // Without X-Team-Uid: the key's teams are what decides it.
      ({ teams } = await new ApiOperations((m, p, b) => this.send(m, p, b, undefined)).call('whoAmI'));
    } catch (err) {
      if (err instanceof ApiCallFailed && err.status === 403) return team;
      throw err;
    }
    const found = teams.find((t) => t.uid === team) ?? teams.find((t) => t.name === team);
    if (!found)
      throw new Error(
        `--team ${team}: the API key belongs to no such team; its teams: ${teams.map((t) => `${t.name} (${t.uid})`).join(', ')}`,
      );
    return found.uid;
  }

  private async send<T>(method: string, path: string, body: unknown, team: string | undefined): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.base}/api/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          'user-agent': CLI_USER_AGENT,
          ...(team ? { 'x-team-uid': team } : {}),
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
    .option('--team <team>', 'team name or uid, when the key belongs to several');
}
