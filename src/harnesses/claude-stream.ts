/**
 * Claude Code's `--output-format stream-json --verbose` lines → factoryd's harness events (and the
 * adapter runner's own: session, files written, the turn's end, fatal provider errors). Pure: one
 * parsed line in, events out.
 */
import type { AdapterEvent } from './adapter-runner.js';

export interface ClaudeStreamContext {
  /** The team secret the key came from, named in an authentication failure. */
  secretName?: string;
}

/** A tool's output in the conversation is cut to this many characters (the transcript has it all). */
const MAX_RESULT_CHARS = 4000;
/** Tools whose `file_path` input is a file they write. */
const WRITING_TOOLS = new Set(['Write', 'Edit', 'MultiEdit', 'NotebookEdit']);

export function translateClaude(event: any, ctx: ClaudeStreamContext = {}): AdapterEvent[] {
  if (!event || typeof event !== 'object') return [];
  const session: AdapterEvent[] =
    typeof event.session_id === 'string' ? [{ type: 'session', id: event.session_id }] : [];
  switch (event.type) {
    case 'system':
      if (event.subtype === 'init')
        return [
          ...session,
          {
            type: 'message',
            role: 'system',
            text: `Claude Code session ${event.session_id ?? '?'}${event.model ? ` (${event.model})` : ''}`,
          },
        ];
      // Retrying a refused key cannot help: the turn stops at once. Other errors are retried by
      // the CLI itself, CLAUDE_CODE_MAX_RETRIES times.
      if (event.subtype === 'api_retry' && (event.error_status === 401 || event.error_status === 403))
        return [...session, { type: 'fatal', message: providerFailure(event.error_status, '', ctx) }];
      return session;
    case 'assistant':
      return [...session, ...(event.message?.content ?? []).flatMap(fromAssistant)];
    case 'user':
      return [...session, ...(event.message?.content ?? []).flatMap(fromToolResult)];
    case 'result':
      return [...session, ...usage(event), turnEnd(event, ctx)];
    default:
      return session;
  }
}

function fromAssistant(block: any): AdapterEvent[] {
  if (block?.type === 'text' && block.text) return [{ type: 'message', role: 'assistant', text: block.text }];
  if (block?.type !== 'tool_use') return [];
  const input = block.input ?? {};
  // A skill load: the Skill tool, or reading a SKILL.md file.
  if (block.name === 'Skill' && typeof (input.skill ?? input.command) === 'string')
    return [{ type: 'action', kind: 'read_skill', input: { skill_name: input.skill ?? input.command } }];
  if (block.name === 'Read' && typeof input.file_path === 'string' && input.file_path.endsWith('SKILL.md'))
    return [{ type: 'action', kind: 'read_skill', input: { skill_path: input.file_path } }];
  const call: AdapterEvent = {
    type: 'action',
    kind: 'tool_call',
    input: { tool: block.name, id: block.id, input },
  };
  if (WRITING_TOOLS.has(block.name) && typeof (input.file_path ?? input.notebook_path) === 'string')
    return [call, { type: 'wrote', path: input.file_path ?? input.notebook_path }];
  return [call];
}

function fromToolResult(block: any): AdapterEvent[] {
  if (block?.type !== 'tool_result') return [];
  const content = block.content;
  const text =
    typeof content === 'string'
      ? content
      : Array.isArray(content)
        ? content
            .filter((c: any) => c?.type === 'text')
            .map((c: any) => c.text)
            .join('\n')
        : '';
  return [
    {
      type: 'action',
      kind: 'tool_result',
      input: {
        id: block.tool_use_id,
        output: text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}…` : text,
        ...(block.is_error ? { is_error: true } : {}),
      },
    },
  ];
}

/** The turn's tokens, per model, as the provider reported them to the CLI. */
function usage(event: any): AdapterEvent[] {
  const byModel = event.modelUsage && typeof event.modelUsage === 'object' ? event.modelUsage : {};
  return Object.entries(byModel as Record<string, any>)
    .filter(([, u]) => u && (u.inputTokens || u.outputTokens))
    .map(([model, u]) => ({
      type: 'usage',
      model_id: model.replace(/\[[^\]]*\]$/, ''), // "claude-…[1m]": the context-window tag is not the model
      input_tokens: u.inputTokens ?? 0,
      output_tokens: u.outputTokens ?? 0,
      ...(u.cacheReadInputTokens ? { cache_read_tokens: u.cacheReadInputTokens } : {}),
      ...(u.cacheCreationInputTokens ? { cache_write_tokens: u.cacheCreationInputTokens } : {}),
    }));
}

function turnEnd(event: any, ctx: ClaudeStreamContext): AdapterEvent {
  const failed = event.is_error === true || (event.subtype && event.subtype !== 'success');
  const text = typeof event.result === 'string' ? event.result : '';
  if (!failed) return { type: 'turn_end', ok: true, message: text || 'done' };
  const status = typeof event.api_error_status === 'number' ? event.api_error_status : undefined;
  return {
    type: 'turn_end',
    ok: false,
    message:
      status !== undefined || /^API Error/i.test(text)
        ? providerFailure(status, text, ctx)
        : `Claude Code ended the turn with an error (${event.subtype ?? 'error'})${text ? `: ${text}` : ''}`,
  };
}

/** A provider failure as a person can act on it. */
function providerFailure(status: number | undefined, detail: string, ctx: ClaudeStreamContext): string {
  const said = detail ? ` (Claude Code: ${detail.slice(0, 300)})` : '';
  const key = ctx.secretName ? `the team secret "${ctx.secretName}"` : 'ANTHROPIC_API_KEY';
  switch (status) {
    case 401:
    case 403:
      return `the model provider refused the API key (HTTP ${status}): check ${key} holds a valid Anthropic API key${said}`;
    case 429:
      return `the model provider is rate-limiting this key (HTTP 429): send a follow-up to retry later, or raise the key's limits${said}`;
    case 529:
    case 503:
      return `the model provider is overloaded (HTTP ${status}): send a follow-up to retry later${said}`;
    case undefined:
      return `the connection to the model provider failed or was cut (check ANTHROPIC_BASE_URL and the network)${said}`;
    default:
      return `the model provider answered HTTP ${status}${said}`;
  }
}
