import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The Anthropic Messages API on loopback, as the real CLIs see it: `POST /v1/messages` answered as
 * server-sent events (message_start, content blocks with their deltas, message_delta with the stop
 * reason and usage, message_stop). Scripted per test: each model request takes the next reply of the
 * script; every request (headers and body) is recorded.
 */

/** One scripted answer of the model. */
export type AnthropicReply =
  | { text: string; usage?: { input_tokens: number; output_tokens: number } }
  | {
      tool: { name: string; input: Record<string, unknown> };
      text?: string;
      usage?: { input_tokens: number; output_tokens: number };
    }
  /** An HTTP error as the provider sends it (401 authentication_error, 429 rate_limit_error, 529 overloaded_error). */
  | { status: number; errorType: string; message: string }
  /** The stream starts, then the connection is cut mid-message. */
  | { drop: true };

/** A scripted step: a reply, one made from the request (its body), or one given once `after` resolves. */
export type ScriptStep =
  | AnthropicReply
  | ((body: any) => AnthropicReply)
  | { after: Promise<unknown>; then: AnthropicReply | ((body: any) => AnthropicReply) };

/** The working directory Claude Code names in its system prompt (the run's workspace). */
export function workingDirectory(body: any): string {
  const m = /Primary working directory: (\S+)/.exec(JSON.stringify(body?.system ?? ''));
  if (!m) throw new Error('the request names no working directory');
  return m[1]!.replace(/\\n$/, '');
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** When it arrived (Date.now()). */
  at: number;
}

export interface AnthropicStub {
  url: string;
  requests: RecordedRequest[];
  /** The requests that asked the model for a turn of the conversation (stream: true, with tools). */
  modelRequests(): RecordedRequest[];
  /** Replies for the next model requests, in order. Once used up, the model answers `fallback`. */
  script(...steps: ScriptStep[]): void;
  close(): Promise<void>;
}

export async function startAnthropicStub(
  fallback: AnthropicReply = { text: 'Done.' },
): Promise<AnthropicStub> {
  const requests: RecordedRequest[] = [];
  let queue: ScriptStep[] = [];
  let ids = 0;
  const server: Server = createServer((req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any = raw;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        /* recorded as text */
      }
      const path = (req.url ?? '').split('?')[0]!;
      requests.push({ method: req.method ?? '', path, headers: req.headers, body, at });
      if (req.method !== 'POST' || path !== '/v1/messages') {
        // count_tokens and anything else the CLI may ask: a small valid answer.
        res.writeHead(path.endsWith('/count_tokens') ? 200 : 404, { 'content-type': 'application/json' });
        res.end(JSON.stringify(path.endsWith('/count_tokens') ? { input_tokens: 10 } : { type: 'error' }));
        return;
      }
      const step: ScriptStep = isTurn(body) ? (queue.shift() ?? fallback) : { text: 'ok' };
      const id = `msg_stub_${++ids}`;
      const reply = (r: AnthropicReply | ((b: any) => AnthropicReply)) =>
        answer(
          res,
          typeof r === 'function' ? r(body) : r,
          body?.model ?? 'claude-stub',
          id,
          body?.stream !== false,
        );
      if (typeof step === 'object' && 'after' in step)
        void step.after.then(() => !res.destroyed && reply(step.then));
      else reply(step);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    modelRequests: () => requests.filter((r) => r.path === '/v1/messages' && isTurn(r.body)),
    script: (...replies) => {
      queue = [...replies];
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A turn of the agent's conversation (not a side request such as a title or a quota probe): it offers tools. */
function isTurn(body: any): boolean {
  return Array.isArray(body?.tools) && body.tools.length > 0;
}

function answer(
  res: ServerResponse,
  reply: AnthropicReply,
  model: string,
  id: string,
  stream: boolean,
): void {
  if ('status' in reply) {
    res.writeHead(reply.status, { 'content-type': 'application/json', 'request-id': `req_${id}` });
    res.end(JSON.stringify({ type: 'error', error: { type: reply.errorType, message: reply.message } }));
    return;
  }
  const usage = ('usage' in reply && reply.usage) || { input_tokens: 120, output_tokens: 30 };
  const blocks: any[] = [];
  if ('text' in reply && reply.text) blocks.push({ type: 'text', text: reply.text });
  if ('tool' in reply)
    blocks.push({ type: 'tool_use', id: `toolu_${id}`, name: reply.tool.name, input: reply.tool.input });
  const stopReason = 'tool' in reply ? 'tool_use' : 'end_turn';
  if (!stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: blocks,
        stop_reason: stopReason,
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const send = (event: string, data: unknown) =>
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  send('message_start', {
    type: 'message_start',
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: usage.input_tokens, output_tokens: 1 },
    },
  });
  if ('drop' in reply) {
    send('content_block_start', {
      type: 'content_block_start',
      index: 0,
      content_block: { type: 'text', text: '' },
    });
    res.socket?.destroy();
    return;
  }
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      send('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'text', text: '' },
      });
      send('content_block_delta', {
        type: 'content_block_delta',
        index,
        delta: { type: 'text_delta', text: b.text },
      });
    } else {
      send('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} },
      });
      send('content_block_delta', {
        type: 'content_block_delta',
        index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) },
      });
    }
    send('content_block_stop', { type: 'content_block_stop', index });
  });
  send('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens },
  });
  send('message_stop', { type: 'message_stop' });
  res.end();
}
