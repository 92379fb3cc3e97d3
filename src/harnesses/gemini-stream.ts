/**
 * `gemini --output-format stream-json` lines → factoryd's harness events (and the adapter runner's
 * own: session, files written, the turn's end). Pure: one parsed line in, events out; kept per CLI
 * process (one turn, reset at its `init`): assistant text arrives in deltas and is reported as one
 * message when the model turns to a tool or ends.
 */
import type { AdapterEvent } from './adapter-runner.js';
import { clipped, explainProviderFailure, GEMINI, skillPathIn } from './stream-common.js';

/** Gemini CLI tools that write the file named by their `file_path` argument. */
const WRITING_TOOLS = new Set(['write_file', 'replace']);

export interface GeminiStreamContext {
  /** The team secret the key came from, named in an authentication failure. */
  secretName?: string;
}

export class GeminiStream {
  private text = '';
  private lastMessage = '';
  private lastError = '';
  /** Files the turn's tool calls write, by call id, known once the call succeeded. */
  private readonly writes = new Map<string, string>();

  constructor(private readonly ctx: GeminiStreamContext = {}) {}

  translate(event: any): AdapterEvent[] {
    if (!event || typeof event !== 'object') return [];
    switch (event.type) {
      case 'init':
        this.text = this.lastMessage = this.lastError = '';
        this.writes.clear();
        return typeof event.session_id === 'string' ? [{ type: 'session', id: event.session_id }] : [];
      case 'message':
        if (event.role === 'assistant' && typeof event.content === 'string')
          // Deltas join into one message; a whole message (delta false) replaces what came before.
          this.text = event.delta === false ? event.content : this.text + event.content;
        return [];
      case 'tool_use':
        return [...this.flush(), ...this.call(event)];
      case 'tool_result':
        return [...this.flush(), ...this.result(event)];
      case 'error':
        if (typeof event.message === 'string') this.lastError = event.message;
        return [];
      case 'result':
        return [...this.flush(), ...usage(event.stats), this.end(event)];
      default:
        return [];
    }
  }

  private flush(): AdapterEvent[] {
    const text = this.text.trim();
    this.text = '';
    if (!text) return [];
    this.lastMessage = text;
    return [{ type: 'message', role: 'assistant', text }];
  }

  private call(event: any): AdapterEvent[] {
    const tool = String(event.tool_name ?? 'unknown');
    const input = isObject(event.parameters) ? event.parameters : {};
    const id = String(event.tool_id);
    if (WRITING_TOOLS.has(tool) && typeof input.file_path === 'string') this.writes.set(id, input.file_path);
    const skill = skillOf(tool, input);
    return [
      ...(skill ? [{ type: 'action', kind: 'read_skill', input: skill }] : []),
      { type: 'action', kind: 'tool_call', input: { tool, id, input } },
    ];
  }

  private result(event: any): AdapterEvent[] {
    const id = String(event.tool_id);
    const ok = event.status === 'success';
    const path = this.writes.get(id);
    this.writes.delete(id);
    return [
      {
        type: 'action',
        kind: 'tool_result',
        input: ok
          ? { id, output: clipped(String(event.output ?? '')) }
          : { id, output: String(event.error?.message ?? event.output ?? 'tool error'), is_error: true },
      },
      ...(ok && path ? [{ type: 'wrote', path }] : []),
    ];
  }

  private end(event: any): AdapterEvent {
    if (event.status === 'success')
      return { type: 'turn_end', ok: true, message: this.lastMessage || 'done' };
    const said = String(event.error?.message ?? this.lastError);
    return {
      type: 'turn_end',
      ok: false,
      message: explainProviderFailure(GEMINI, 'Gemini CLI', said, this.ctx.secretName),
    };
  }
}

/** The skill a tool call loads: the activate_skill tool, or reading a SKILL.md file. */
function skillOf(tool: string, input: Record<string, unknown>): Record<string, unknown> | undefined {
  if (tool === 'activate_skill' && typeof input.name === 'string') return { skill_name: input.name };
  const read =
    tool === 'read_file' ? input.file_path : tool === 'run_shell_command' ? input.command : undefined;
  const path = typeof read === 'string' ? skillPathIn(read) : undefined;
  return path ? { skill_path: path } : undefined;
}

/** One usage event per model the turn used, as Gemini CLI counted the provider's reports. */
function usage(stats: any): AdapterEvent[] {
  const models = isObject(stats?.models) ? stats.models : {};
  return Object.entries(models as Record<string, any>)
    .filter(([, m]) => num(m?.input_tokens) + num(m?.output_tokens) > 0)
    .map(([model, m]) => ({
      type: 'usage',
      model_id: model,
      input_tokens: num(m.input_tokens),
      output_tokens: num(m.output_tokens),
      ...(num(m.cached) ? { cache_read_tokens: num(m.cached) } : {}),
    }));
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === 'object' && !Array.isArray(v);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
