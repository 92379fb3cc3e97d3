/**
 * `codex exec --json` lines → factoryd's harness events (and the adapter runner's own: session, files
 * written, the turn's end, fatal provider errors). Pure: one parsed line in, events out; kept per
 * CLI session, because Codex reports the session's running token total at each turn's end and a
 * run's usage is counted per turn.
 */
import type { AdapterEvent } from './adapter-runner.js';
import { clipped, explainProviderFailure, OPENAI, REFUSED_KEY, skillPathIn } from './stream-common.js';

export interface CodexStreamContext {
  /** The model the turn asked for (Codex does not name it in its stream); `codex` when its default. */
  modelId?: string;
  /** The team secret the key came from, named in an authentication failure. */
  secretName?: string;
}

export class CodexStream {
  private totals = { input: 0, cached: 0, output: 0 };
  private lastMessage = '';
  private lastError = '';
  /** Tool items reported as started, whose call is in the conversation already. */
  private readonly started = new Set<string>();

  constructor(private readonly ctx: CodexStreamContext = {}) {}

  translate(event: any): AdapterEvent[] {
    if (!event || typeof event !== 'object') return [];
    switch (event.type) {
      case 'thread.started':
        return typeof event.thread_id === 'string' ? [{ type: 'session', id: event.thread_id }] : [];
      case 'turn.started':
        this.lastMessage = '';
        this.lastError = '';
        return [];
      case 'item.started':
        return this.call(event.item ?? {});
      case 'item.completed':
        return this.completed(event.item ?? {});
      case 'error': {
        // "Reconnecting... n/5 (…)" while Codex retries, then the final error. A refused key is not
        // worth five retries: the turn stops at the first.
        const said = typeof event.message === 'string' ? event.message : '';
        this.lastError = said || this.lastError;
        return REFUSED_KEY.test(said) ? [{ type: 'fatal', message: this.failure(said) }] : [];
      }
      case 'turn.completed':
        return [
          ...this.usage(event.usage),
          { type: 'turn_end', ok: true, message: this.lastMessage || 'done' },
        ];
      case 'turn.failed':
        return [
          {
            type: 'turn_end',
            ok: false,
            message: this.failure(String(event.error?.message ?? this.lastError)),
          },
        ];
      default:
        return [];
    }
  }

  private failure(said: string): string {
    return explainProviderFailure(OPENAI, 'Codex', said, this.ctx.secretName);
  }

  /** A tool call as it starts: the conversation shows it before its result. */
  private call(item: any): AdapterEvent[] {
    const call = toolCall(item);
    if (!call) return [];
    this.started.add(item.id);
    const skill = item.type === 'command_execution' ? skillPathIn(String(item.command ?? '')) : undefined;
    return [
      ...(skill ? [{ type: 'action', kind: 'read_skill', input: { skill_path: skill } }] : []),
      { type: 'action', kind: 'tool_call', input: call },
    ];
  }

  private completed(item: any): AdapterEvent[] {
    if (item.type === 'agent_message') {
      if (typeof item.text !== 'string' || !item.text) return [];
      this.lastMessage = item.text;
      return [{ type: 'message', role: 'assistant', text: item.text }];
    }
    const result = toolResult(item);
    if (!result) return []; // reasoning, to-do lists, notices: the transcript has them
    const call = this.started.delete(item.id) ? [] : this.call(item);
    this.started.delete(item.id);
    const wrote: AdapterEvent[] =
      item.type === 'file_change' && item.status === 'completed'
        ? (item.changes ?? [])
            .filter((c: any) => c?.kind !== 'delete' && typeof c?.path === 'string')
            .map((c: any) => ({ type: 'wrote', path: c.path }))
        : [];
    return [...call, { type: 'action', kind: 'tool_result', input: { id: item.id, ...result } }, ...wrote];
  }

  /** This turn's tokens: the session's new total less the one before. */
  private usage(u: any): AdapterEvent[] {
    if (!u || typeof u !== 'object') return [];
    const now = {
      input: num(u.input_tokens),
      cached: num(u.cached_input_tokens),
      output: num(u.output_tokens),
    };
    const before = this.totals;
    this.totals = now;
    const cached = Math.max(0, now.cached - before.cached);
    return [
      {
        type: 'usage',
        model_id: this.ctx.modelId ?? 'codex',
        input_tokens: Math.max(0, now.input - before.input),
        output_tokens: Math.max(0, now.output - before.output),
        ...(cached ? { cache_read_tokens: cached } : {}),
      },
    ];
  }
}

/** The call of a tool item: what it is and its input. */
function toolCall(item: any): Record<string, unknown> | undefined {
  switch (item.type) {
    case 'command_execution':
      return { tool: 'exec_command', id: item.id, input: { command: String(item.command ?? '') } };
    case 'file_change':
      return {
        tool: 'apply_patch',
        id: item.id,
        input: { changes: (item.changes ?? []).map((c: any) => ({ path: c?.path, kind: c?.kind })) },
      };
    case 'mcp_tool_call':
      return { tool: `${item.server}.${item.tool}`, id: item.id, input: item.arguments ?? {} };
    case 'web_search':
      return { tool: 'web_search', id: item.id, input: { query: item.query } };
    default:
      return undefined;
  }
}

/** The result of a finished tool item. */
function toolResult(item: any): Record<string, unknown> | undefined {
  const failed = item.status === 'failed' || item.status === 'declined';
  switch (item.type) {
    case 'command_execution':
      return {
        output: clipped(String(item.aggregated_output ?? '')),
        exit_code: item.exit_code ?? null,
        ...(failed || (item.exit_code ?? 0) !== 0 ? { is_error: true } : {}),
      };
    case 'file_change':
      return {
        output: (item.changes ?? []).map((c: any) => `${c?.kind} ${c?.path}`).join('\n'),
        ...(failed ? { is_error: true } : {}),
      };
    case 'mcp_tool_call':
      return item.error
        ? { output: String(item.error.message ?? ''), is_error: true }
        : { output: clipped(JSON.stringify(item.result?.content ?? [])) };
    case 'web_search':
      return { output: '' };
    default:
      return undefined;
  }
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
