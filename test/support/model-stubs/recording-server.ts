import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * What the OpenAI Responses and Gemini stubs share: a real HTTP server on loopback that records every
 * request (headers and body) before answering it, and a script of model turns per test.
 */

/** One request a model stub received, as it arrived. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** The body parsed as JSON, or undefined when it was not JSON (then `raw` holds it). */
  body: any;
  raw: string;
}

/** Token counts a scripted turn reports, mapped by each stub to its provider's usage fields. */
export interface StubUsage {
  input: number;
  output: number;
  cached?: number;
}

/**
 * What the model does for one request: answer (text and/or tool calls, with usage), fail with an
 * HTTP status the way the provider does, drop the stream half-way, or never finish.
 */
export type ScriptedTurn<Call> =
  | { text?: string; calls?: Call[]; usage?: StubUsage }
  | {
      error: 401 | 429 | 500 | 529;
      /** a 429 of a per-minute quota (Gemini: retried), not per-day */ perMinute?: true;
    }
  | { drop: true }
  | { hang: true };

/** A scripted step: a turn, one made from the request's body, or one given once `after` resolves. */
export type ScriptStep<Turn> =
  Turn | ((body: any) => Turn) | { after: Promise<unknown>; then: Turn | ((body: any) => Turn) };

/** Answers a request: `next()` is the script's next turn (once its `after` resolved). */
export type StubHandler<Turn> = (
  req: RecordedRequest,
  res: http.ServerResponse,
  next: () => Promise<Turn>,
) => void;

export class ScriptedServer<Turn extends object> {
  readonly requests: RecordedRequest[] = [];
  /** The origin, `http://127.0.0.1:PORT`, once started. */
  origin = '';
  private queue: ScriptStep<Turn>[] = [];
  private readonly server: http.Server;

  constructor(handle: StubHandler<Turn>, fallback: Turn) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const url = new URL(req.url ?? '/', 'http://stub');
        const recorded: RecordedRequest = {
          method: req.method ?? 'GET',
          path: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          body: parseJson(raw),
          raw,
        };
        this.requests.push(recorded);
        const next = async (): Promise<Turn> => {
          const step = this.queue.shift() ?? fallback;
          const made = (s: Turn | ((body: any) => Turn)) =>
            typeof s === 'function' ? (s as (body: any) => Turn)(recorded.body) : s;
          if ('after' in step && 'then' in step) {
            await step.after;
            return made(step.then);
          }
          return made(step as Turn | ((body: any) => Turn));
        };
        handle(recorded, res, next);
      });
    });
  }

  /** Turns for the next model requests, in order; once used up, the model answers the fallback. */
  script(...steps: ScriptStep<Turn>[]): void {
    this.queue = [...steps];
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function parseJson(raw: string): unknown {
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
