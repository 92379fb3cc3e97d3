import type http from 'node:http';
import {
  ScriptedServer,
  type RecordedRequest,
  type ScriptedTurn,
  type ScriptStep,
  type StubUsage,
} from './recording-server.js';

/**
 * A tool call the model makes: a function tool (Codex's `exec_command`, MCP tools) with JSON
 * arguments, or a freeform custom tool (Codex's `apply_patch`) with its raw input.
 */
export type OpenAICall =
  { name: string; arguments: Record<string, unknown> } | { custom: string; input: string };

export type OpenAITurn = ScriptedTurn<OpenAICall>;

/**
 * The OpenAI Responses API (`POST /v1/responses`, `stream: true`) on loopback, as Codex reads it:
 * server-sent events `response.created`, `response.output_item.added`, `response.output_text.delta`,
 * `response.output_item.done` (messages, `function_call`, `custom_tool_call`) and
 * `response.completed` with the usage. Scripted per test (`script`): each model request takes the
 * next turn; every request (headers and body) is recorded. Errors are the API's JSON error bodies
 * with its status codes.
 */
export interface OpenAIResponsesStub {
  /** The base URL a client puts before `/responses` (`http://127.0.0.1:PORT/v1`). */
  url: string;
  requests: RecordedRequest[];
  /** The model calls (`POST …/responses`) received so far. */
  modelRequests(): RecordedRequest[];
  script(...steps: ScriptStep<OpenAITurn>[]): void;
  close(): Promise<void>;
}

export async function startOpenAIResponsesStub(
  fallback: OpenAITurn = { text: 'Done.' },
): Promise<OpenAIResponsesStub> {
  let answered = 0;
  const isModelCall = (r: RecordedRequest) => r.method === 'POST' && r.path.endsWith('/responses');
  const server = new ScriptedServer<OpenAITurn>((req, res, next) => {
    if (!isModelCall(req)) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${req.path}`, type: 'invalid_request_error' } }));
      return;
    }
    const n = ++answered;
    void next().then((turn) => !res.destroyed && answer(turn, n, res));
  }, fallback);
  await server.start();
  return {
    url: `${server.origin}/v1`,
    requests: server.requests,
    modelRequests: () => server.requests.filter(isModelCall),
    script: (...steps) => server.script(...steps),
    close: () => server.close(),
  };
}

const ERRORS: Record<number, { message: string; type: string; code: string | null }> = {
  401: { message: 'Incorrect API key provided.', type: 'invalid_request_error', code: 'invalid_api_key' },
  429: {
    message: 'Rate limit reached for requests. Please try again later.',
    type: 'requests',
    code: 'rate_limit_exceeded',
  },
  500: {
    message: 'The server had an error while processing your request.',
    type: 'server_error',
    code: null,
  },
  529: {
    message: 'The engine is currently overloaded, please try again later.',
    type: 'server_error',
    code: null,
  },
};

function answer(turn: OpenAITurn, n: number, res: http.ServerResponse): void {
  if ('error' in turn) {
    res.writeHead(turn.error, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { ...ERRORS[turn.error], param: null } }));
    return;
  }
  const responseId = `resp_stub_${n}`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (event: Record<string, unknown> & { type: string }) =>
    res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
  send({ type: 'response.created', response: { id: responseId, status: 'in_progress', output: [] } });
  if ('hang' in turn) return; // the connection stays open until the client goes or the stub stops
  if ('drop' in turn) {
    // Part of an answer, then the connection ends without response.completed.
    const delta = {
      type: 'response.output_text.delta',
      output_index: 0,
      content_index: 0,
      item_id: 'msg_drop',
      delta: 'Wor',
    };
    res.write(`event: ${delta.type}\ndata: ${JSON.stringify(delta)}\n\n`, () => res.destroy());
    return;
  }
  const items: Array<Record<string, unknown>> = [];
  if (turn.text !== undefined) {
    const id = `msg_stub_${n}`;
    const index = items.length;
    send({
      type: 'response.output_item.added',
      output_index: index,
      item: { type: 'message', id, role: 'assistant', status: 'in_progress', content: [] },
    });
    // Split in two deltas, as a real stream arrives in pieces.
    const half = Math.ceil(turn.text.length / 2);
    for (const delta of [turn.text.slice(0, half), turn.text.slice(half)].filter(Boolean))
      send({ type: 'response.output_text.delta', output_index: index, content_index: 0, item_id: id, delta });
    const item = {
      type: 'message',
      id,
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: turn.text, annotations: [] }],
    };
    send({ type: 'response.output_item.done', output_index: index, item });
    items.push(item);
  }
  for (const [i, call] of (turn.calls ?? []).entries()) {
    const callId = `call_stub_${n}_${i}`;
    const item =
      'custom' in call
        ? {
            type: 'custom_tool_call',
            id: `ctc_stub_${n}_${i}`,
            call_id: callId,
            name: call.custom,
            input: call.input,
            status: 'completed',
          }
        : {
            type: 'function_call',
            id: `fc_stub_${n}_${i}`,
            call_id: callId,
            name: call.name,
            arguments: JSON.stringify(call.arguments),
            status: 'completed',
          };
    send({
      type: 'response.output_item.added',
      output_index: items.length,
      item: { ...item, status: 'in_progress' },
    });
    send({ type: 'response.output_item.done', output_index: items.length, item });
    items.push(item);
  }
  send({
    type: 'response.completed',
    response: { id: responseId, status: 'completed', output: items, usage: usageOf(turn.usage) },
  });
  res.end();
}

function usageOf(usage: StubUsage = { input: 10, output: 5 }) {
  return {
    input_tokens: usage.input,
    input_tokens_details: { cached_tokens: usage.cached ?? 0 },
    output_tokens: usage.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.input + usage.output,
  };
}
