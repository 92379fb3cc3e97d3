import { clip, skillPathIn, type TranslatedEvent } from './adapter-events.js';
import { explainProviderFailure, GEMINI } from './provider-errors.js';

/** Gemini CLI tools that write the file named by their `file_path` argument. */
const WRITING_TOOLS = new Set(['write_file', 'replace']);

/**
 * `gemini -p … --output-format stream-json` events → factoryd harness events. Pure: one parsed line
 * in, events out. Kept per CLI process (one turn): assistant text arrives in deltas and is reported
 * as one message when the model turns to a tool or ends; a tool's call and its result arrive apart
 * and are reported as one action.
 */
export class GeminiStream {
  private text = '';
  private lastMessage = '';
  private lastError = '';
  private readonly calls = new Map<string, { tool: string; input: Record<string, unknown> }>();

  translate(event: any): TranslatedEvent[] {
    if (!event || typeof event !== 'object') return [];
    switch (event.type) {
      case 'init':
        return typeof event.session_id === 'string' ? [{ type: 'session', id: event.session_id }] : [];
      case 'message':
        if (event.role === 'assistant' && typeof event.content === 'string') {
          // Deltas join into one message; a whole message (delta false) replaces what came before.
          this.text = event.delta === false ? event.content : this.text + event.content;
        }
        return [];
      case 'tool_use': {
        const input = isObject(event.parameters) ? event.parameters : {};
        this.calls.set(String(event.tool_id), { tool: String(event.tool_name), input });
        return this.flush();
      }
      case 'tool_result':
        return [...this.flush(), ...this.toolResult(event)];
      case 'error':
        if (typeof event.message === 'string') this.lastError = event.message;
        return [];
      case 'result':
        return [...this.flush(), ...usage(event.stats), this.end(event)];
      default:
        return [];
    }
  }

  private flush(): TranslatedEvent[] {
    const text = this.text.trim();
    this.text = '';
    if (!text) return [];
    this.lastMessage = text;
    return [{ type: 'message', role: 'assistant', text }];
  }

  private toolResult(event: any): TranslatedEvent[] {
    const id = String(event.tool_id);
    const call = this.calls.get(id) ?? { tool: 'unknown', input: {} };
    this.calls.delete(id);
    const ok = event.status === 'success';
    const out: TranslatedEvent[] = [];
    const skill = skillOf(call.tool, call.input);
    if (skill) out.push({ type: 'action', kind: 'read_skill', input: skill });
    out.push({
      type: 'action',
      kind: 'tool_call',
      input: {
        tool: call.tool,
        id,
        input: call.input,
        result: ok
          ? { status: 'success', output: clip(String(event.output ?? '')) }
          : { status: 'error', error: String(event.error?.message ?? 'tool error') },
      },
    });
    if (ok && WRITING_TOOLS.has(call.tool) && typeof call.input.file_path === 'string')
      out.push({ type: 'file_written', path: call.input.file_path });
    return out;
  }

  private end(event: any): TranslatedEvent {
    if (event.status === 'success')
      return { type: 'result', status: 'succeeded', message: this.lastMessage || 'done' };
    const said = String(event.error?.message ?? this.lastError ?? '');
    return { type: 'result', status: 'failed', message: explainProviderFailure(GEMINI, said) };
  }
}

/** The skill a tool call loads: the activate_skill tool, or reading a SKILL.md file. */
function skillOf(tool: string, input: Record<string, unknown>): Record<string, unknown> | undefined {
  if (tool === 'activate_skill' && typeof input.name === 'string') return { skill_name: input.name };
  const path =
    tool === 'read_file' && typeof input.file_path === 'string'
      ? skillPathIn(input.file_path)
      : tool === 'run_shell_command' && typeof input.command === 'string'
        ? skillPathIn(input.command)
        : undefined;
  return path ? { skill_path: path } : undefined;
}

/** One usage event per model the turn used, as Gemini CLI counted them. */
function usage(stats: any): TranslatedEvent[] {
  const models = isObject(stats?.models) ? stats.models : {};
  return Object.entries(models)
    .filter(([, m]: [string, any]) => num(m?.input_tokens) + num(m?.output_tokens) > 0)
    .map(([model, m]: [string, any]) => ({
      type: 'usage',
      model_id: model,
      input_tokens: num(m.input_tokens),
      output_tokens: num(m.output_tokens),
      cache_read_tokens: num(m.cached),
    }));
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === 'object' && !Array.isArray(v);
const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
