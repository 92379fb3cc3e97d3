import http from 'node:http';
import type { AddressInfo } from 'node:net';

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

export type StubHandler = (req: RecordedRequest, res: http.ServerResponse) => void;

/**
 * A real HTTP server on loopback that records every request (headers and body) before the stub
 * answers it. The model stubs (openai-responses.ts, gemini.ts) each speak their provider's wire
 * format on top of it.
 */
export class RecordingServer {
  readonly requests: RecordedRequest[] = [];
  private readonly server: http.Server;

  constructor(handle: StubHandler) {
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
        try {
          handle(recorded, res);
        } catch (err) {
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`model stub failed: ${String(err)}`);
        }
      });
    });
  }

  /** Listens on a free loopback port; answers its origin (`http://127.0.0.1:PORT`). */
  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
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

/** Token counts a scripted turn reports, mapped by each stub to its provider's usage fields. */
export interface StubUsage {
  input: number;
  output: number;
  cached?: number;
}

/**
 * What the model does for one request: answer (text and/or tool calls, with usage), fail with an
 * HTTP status the way the provider does, drop the stream half-way, or never answer.
 */
export type ScriptedTurn<Call> =
  | { text?: string; calls?: Call[]; usage?: StubUsage }
  | { error: 401 | 429 | 500 | 529 }
  | { drop: true }
  | { hang: true };

/** Turn n of a script (a list, or a function of the request), or undefined when it has none. */
export function turnOf<Call>(
  script: ScriptedTurn<Call>[] | ((req: RecordedRequest, n: number) => ScriptedTurn<Call> | undefined),
  req: RecordedRequest,
  n: number,
): ScriptedTurn<Call> | undefined {
  return typeof script === 'function' ? script(req, n) : script[n];
}
