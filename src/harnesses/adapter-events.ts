/**
 * What a vendor CLI's stream translates to (pure; no NestJS, no I/O): the harness protocol's stdout
 * events (docs/workers.md, "Harness protocol"), plus two notes for the adapter that runs the CLI —
 * the CLI's session id (to resume it for a follow-up) and a file the agent wrote (the adapter reads it
 * and reports a FILE artifact). Those two never reach the worker as they are.
 */
export type ProtocolEvent =
  | { type: 'message'; role: 'assistant' | 'system'; text: string }
  | { type: 'action'; kind: string; input: Record<string, unknown> }
  | {
      type: 'usage';
      model_id: string;
      input_tokens: number;
      output_tokens: number;
      cache_read_tokens?: number;
      cache_write_tokens?: number;
    }
  | { type: 'result'; status: 'succeeded' | 'failed'; message: string };

export type AdapterNote = { type: 'session'; id: string } | { type: 'file_written'; path: string };

export type TranslatedEvent = ProtocolEvent | AdapterNote;

/** A tool's output in a conversation action is cut here (the transcript keeps it all). */
export const TOOL_OUTPUT_LIMIT = 4096;

export function clip(text: string, limit = TOOL_OUTPUT_LIMIT): string {
  return text.length > limit ? `${text.slice(0, limit)}… (${text.length - limit} more characters)` : text;
}

/** The path of a SKILL.md a shell command or file tool reads, if it reads one. */
export function skillPathIn(text: string): string | undefined {
  return /([^\s'"`<>|;&]*SKILL\.md)\b/.exec(text)?.[1];
}
