import type http from 'node:http';
import {
  ScriptedServer,
  type RecordedRequest,
  type ScriptedTurn,
  type ScriptStep,
  type StubUsage,
} from './recording-server.js';

/** A function call the model makes (Gemini CLI's `write_file`, `run_shell_command`, MCP tools). */
export interface GeminiCall {
  name: string;
  args: Record<string, unknown>;
}

export type GeminiTurn = ScriptedTurn<GeminiCall>;

/**
 * The Gemini API on loopback, as Gemini CLI calls it: `POST /v1beta/models/{model}:generateContent`
 * (JSON) and `:streamGenerateContent?alt=sse` (server-sent `data:` chunks of a
 * GenerateContentResponse, `usageMetadata` on the last). Scripted per test (`script`): each
 * conversational request takes the next turn; a request for structured JSON output (the CLI's model
 * router and other classifiers send `responseJsonSchema`) is answered from its schema without using
 * one. Every request is recorded. Errors are Google's JSON error bodies.
 */
export interface GeminiStub {
  /** GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:PORT`. */
  url: string;
  requests: RecordedRequest[];
  /** The conversational requests (those a script turn answers), in order. */
  modelRequests(): RecordedRequest[];
  script(...steps: ScriptStep<GeminiTurn>[]): void;
  close(): Promise<void>;
}

const METHOD = /:(generateContent|streamGenerateContent)$/;

export async function startGeminiStub(fallback: GeminiTurn = { text: 'Done.' }): Promise<GeminiStub> {
  const isModelCall = (r: RecordedRequest) =>
    r.method === 'POST' && METHOD.test(r.path) && !structuredOutputSchema(r);
  const server = new ScriptedServer<GeminiTurn>((req, res, next) => {
    const method = METHOD.exec(req.path)?.[1];
    if (req.method !== 'POST' || !method) {
      sendError(res, 404, 'NOT_FOUND', `no route ${req.path}`);
      return;
    }
    const schema = structuredOutputSchema(req);
    if (schema) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          chunk([{ text: JSON.stringify(sampleOf(schema)) }], 'STOP', { input: 50, output: 10 }),
        ),
      );
      return;
    }
    void next().then((turn) => !res.destroyed && answer(turn, method === 'streamGenerateContent', res));
  }, fallback);
  await server.start();
  return {
    url: server.origin,
    requests: server.requests,
    modelRequests: () => server.requests.filter(isModelCall),
    script: (...steps) => server.script(...steps),
    close: () => server.close(),
  };
}

/** The schema of a request for structured JSON output (the CLI's router and classifiers), if it is one. */
function structuredOutputSchema(req: RecordedRequest): unknown {
  const config = req.body?.generationConfig;
  return config?.responseJsonSchema ?? config?.responseSchema;
}

function answer(turn: GeminiTurn, stream: boolean, res: http.ServerResponse): void {
  if ('error' in turn) {
    const [status, state, message, details] = ERRORS[turn.error];
    sendError(res, status, state, message, turn.perMinute ? PER_MINUTE : details);
    return;
  }
  const parts: Array<Record<string, unknown>> =
    'text' in turn || 'calls' in turn
      ? [
          ...(turn.text ? [{ text: turn.text }] : []),
          ...(turn.calls ?? []).map((c) => ({ functionCall: { name: c.name, args: c.args } })),
        ]
      : [];
  if (!stream) {
    if ('hang' in turn) return;
    if ('drop' in turn) return void res.destroy();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(chunk(parts, 'STOP', turn.usage)));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (body: unknown) => res.write(`data: ${JSON.stringify(body)}\r\n\r\n`);
  if ('hang' in turn) return void send(chunk([{ text: 'Working' }]));
  if ('drop' in turn) {
    // Part of an answer, then the connection ends without a finishReason.
    res.write(`data: ${JSON.stringify(chunk([{ text: 'Partial answ' }]))}\r\n\r\n`, () => res.destroy());
    return;
  }
  // Text first (split, as a stream arrives in pieces), then the calls with the finish and usage.
  const text = turn.text ?? '';
  const half = Math.ceil(text.length / 2);
  const calls = parts.filter((p) => 'functionCall' in p);
  if (text.length > 1) send(chunk([{ text: text.slice(0, half) }]));
  const rest = text.length > 1 ? text.slice(half) : text;
  send(chunk([...(rest ? [{ text: rest }] : []), ...calls], 'STOP', turn.usage));
  res.end();
}

function chunk(parts: Array<Record<string, unknown>>, finishReason?: string, usage?: StubUsage) {
  return {
    candidates: [{ content: { role: 'model', parts }, index: 0, ...(finishReason ? { finishReason } : {}) }],
    ...(finishReason ? { usageMetadata: usageOf(usage) } : {}),
    modelVersion: 'gemini-stub-001',
    responseId: `stub-${Math.random().toString(36).slice(2, 10)}`,
  };
}

function usageOf(usage: StubUsage = { input: 10, output: 5 }) {
  return {
    promptTokenCount: usage.input,
    candidatesTokenCount: usage.output,
    totalTokenCount: usage.input + usage.output,
    ...(usage.cached ? { cachedContentTokenCount: usage.cached } : {}),
  };
}

/** Google's answers: 429 is a daily quota (the CLI gives up at once; a per-minute one it retries for minutes). */
const ERRORS: Record<number, [number, string, string, unknown[]?]> = {
  401: [401, 'UNAUTHENTICATED', 'API key not valid. Please pass a valid API key.'],
  429: [
    429,
    'RESOURCE_EXHAUSTED',
    'You exceeded your current quota, please check your plan and billing details.',
    [
      {
        '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
        violations: [
          {
            quotaMetric: 'generativelanguage.googleapis.com/generate_content_requests',
            quotaId: 'GenerateRequestsPerDayPerProjectPerModel',
          },
        ],
      },
    ],
  ],
  500: [500, 'INTERNAL', 'An internal error has occurred.'],
  529: [503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.'],
};

/** A per-minute quota's QuotaFailure: Gemini CLI retries it (a per-day one it does not). */
const PER_MINUTE = [
  {
    '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
    violations: [
      {
        quotaMetric: 'generativelanguage.googleapis.com/generate_content_requests',
        quotaId: 'GenerateRequestsPerMinutePerProjectPerModel',
      },
    ],
  },
];

function sendError(
  res: http.ServerResponse,
  code: number,
  status: string,
  message: string,
  details: unknown[] = [],
) {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { code, message, status, details } }));
}

/** A value that satisfies a (Gemini-flavoured, upper-case types) JSON schema. */
function sampleOf(schema: any): unknown {
  switch (String(schema?.type ?? '').toLowerCase()) {
    case 'object':
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, s]) => [k, sampleOf(s)]));
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return 10;
    case 'boolean':
      return false;
    default:
      return schema?.enum?.[0] ?? 'simple';
  }
}
