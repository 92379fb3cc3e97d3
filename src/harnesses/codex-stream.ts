import { clip, skillPathIn, type TranslatedEvent } from './adapter-events.js';
import { explainProviderFailure, OPENAI } from './provider-errors.js';

/**
 * `codex exec --json` events → factoryd harness events. Pure: one parsed line in, events out. Kept
 * per CLI session (one adapter process), because Codex reports a session's running token total at
 * the end of each turn and a run's usage is counted per turn.
 */
export class CodexStream {
  private totals = { input: 0, cached: 0, cacheWrite: 0, output: 0 };
  private lastMessage = '';
  private lastError = '';

  constructor(private readonly modelId: string) {}

  translate(event: any): TranslatedEvent[] {
    if (!event || typeof event !== 'object') return [];
    switch (event.type) {
      case 'thread.started':
        return typeof event.thread_id === 'string' ? [{ type: 'session', id: event.thread_id }] : [];
      case 'turn.started':
        this.lastMessage = '';
        this.lastError = '';
        return [];
      case 'item.completed':
        return this.item(event.item ?? {});
      case 'error':
        // "Reconnecting... n/5 (…)" while Codex retries, then the final error: the last one says why.
        if (typeof event.message === 'string') this.lastError = event.message;
        return [];
      case 'turn.completed':
        return [
          ...this.usage(event.usage),
          { type: 'result', status: 'succeeded', message: this.lastMessage || 'done' },
        ];
      case 'turn.failed': {
        const said = String(event.error?.message ?? this.lastError ?? '');
        return [{ type: 'result', status: 'failed', message: explainProviderFailure(OPENAI, said) }];
      }
      default:
        return [];
    }
  }

  private item(item: any): TranslatedEvent[] {
    switch (item.type) {
      case 'agent_message':
        if (typeof item.text !== 'string' || !item.text) return [];
        this.lastMessage = item.text;
        return [{ type: 'message', role: 'assistant', text: item.text }];
      case 'command_execution': {
        const command = String(item.command ?? '');
        const skill = skillPathIn(command);
        const call: TranslatedEvent = {
          type: 'action',
          kind: 'tool_call',
          input: {
            tool: 'exec_command',
            id: item.id,
            input: { command },
            result: {
              status: item.status,
              exit_code: item.exit_code ?? null,
              output: clip(String(item.aggregated_output ?? '')),
            },
          },
        };
        return skill ? [{ type: 'action', kind: 'read_skill', input: { skill_path: skill } }, call] : [call];
      }
      case 'file_change': {
        const changes = Array.isArray(item.changes) ? item.changes : [];
        const written: TranslatedEvent[] =
          item.status === 'completed'
            ? changes
                .filter((c: any) => c.kind !== 'delete' && typeof c.path === 'string')
                .map((c: any) => ({ type: 'file_written', path: c.path }))
            : [];
        return [
          {
            type: 'action',
            kind: 'tool_call',
            input: {
              tool: 'apply_patch',
              id: item.id,
              input: { changes: changes.map((c: any) => ({ path: c.path, kind: c.kind })) },
              result: { status: item.status },
            },
          },
          ...written,
        ];
      }
      case 'mcp_tool_call':
        return [
          {
            type: 'action',
            kind: 'tool_call',
            input: {
              tool: `${item.server}.${item.tool}`,
              id: item.id,
              input: item.arguments ?? {},
              result: item.error
                ? { status: 'failed', error: String(item.error.message ?? '') }
                : { status: item.status, output: clip(JSON.stringify(item.result?.content ?? [])) },
            },
          },
        ];
      case 'web_search':
        return [
          {
            type: 'action',
            kind: 'tool_call',
            input: { tool: 'web_search', id: item.id, input: { query: item.query } },
          },
        ];
      default:
        // Reasoning, to-do lists and non-fatal notices stay in the transcript.
        return [];
    }
  }

  /** This turn's tokens: the session's new total less the previous one. */
  private usage(u: any): TranslatedEvent[] {
    if (!u || typeof u !== 'object') return [];
    const now = {
      input: num(u.input_tokens),
      cached: num(u.cached_input_tokens),
      cacheWrite: num(u.cache_write_input_tokens),
      output: num(u.output_tokens),
    };
    const before = this.totals;
    this.totals = now;
    const turn = {
      input: Math.max(0, now.input - before.input),
      cached: Math.max(0, now.cached - before.cached),
      cacheWrite: Math.max(0, now.cacheWrite - before.cacheWrite),
      output: Math.max(0, now.output - before.output),
    };
    return [
      {
        type: 'usage',
        model_id: this.modelId,
        input_tokens: turn.input,
        output_tokens: turn.output,
        cache_read_tokens: turn.cached,
        ...(turn.cacheWrite ? { cache_write_tokens: turn.cacheWrite } : {}),
      },
    ];
  }
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
