import { storableText, storableValue } from '../../common/storable.js';
import { parseArtifactReport, type ArtifactReport } from '../../runs/artifact.js';

/**
 * The harness protocol (docs/workers.md), as pure functions: what the worker writes on a harness's
 * stdin and how it reads a line of its stdout.
 */

/** stdin, one JSON document per line. */
export type HarnessInput =
  | {
      type: 'prompt';
      run_id: string;
      prompt: string;
      base_prompt?: string;
      /** Follow-ups that arrived while the run was queued, oldest first. */
      followups: string[];
      /** The workspace files the run came with (e.g. event-payload.json). */
      attachments: string[];
      /** On a continued run: the conversation so far. */
      history?: Array<{ role: string; text: string }>;
    }
  | { type: 'followup'; message: string }
  /** Stop the current turn only; the harness answers BLOCKED and waits for a follow-up. */
  | { type: 'interrupt' }
  | { type: 'cancel' };

/** What a stdout line means to the worker. */
export type HarnessEvent =
  | { type: 'message'; role: string; text: string }
  | { type: 'action'; kind: string; input: Record<string, unknown> }
  | { type: 'status'; state: 'BLOCKED'; message: string }
  | { type: 'result'; status: 'succeeded' | 'failed'; message: string }
  /** A plan, pull request, file, screenshot or external reference the run leaves (runs/artifact.ts). */
  | { type: 'artifact'; artifact: WireArtifact }
  | { type: 'transcript'; stream: 'stdout' | 'stderr'; text: string }
  /** Tokens one model call (or turn) used, as the provider reported them; the service sums them per run and model. */
  | TokenUsage;

export interface TokenUsage {
  type: 'usage';
  model_id: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_write_tokens?: number;
}

/** A count of one report: a whole number of tokens, far below what a bigint column sums safely. */
const MAX_TOKENS = 2 ** 40;
const isCount = (v: unknown): v is number =>
  Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= MAX_TOKENS;
const isOptionalCount = (v: unknown) => v === undefined || isCount(v);

const MAX_TEXT = 64 * 1024;
/** A harness's JSON (an action's input, an artifact) is kept this deep; deeper parts are replaced (storableValue). */
const MAX_HARNESS_JSON_DEPTH = 64;

/**
 * A harness's text as it is stored: at most MAX_TEXT characters, NUL and lone surrogates replaced
 * (storableText; after the cut, which may split a surrogate pair).
 */
export const harnessText = (text: string): string => storableText(text.slice(0, MAX_TEXT));

const harnessJson = (value: Record<string, unknown>) =>
  storableValue(value, MAX_HARNESS_JSON_DEPTH) as Record<string, unknown>;

/**
 * A stdout line: a protocol event when it is one, otherwise a transcript line. Every string in it is
 * storable (harnessText, harnessJson): one NUL in a harness's output must not make its reports fail.
 */
export function parseHarnessLine(line: string): HarnessEvent {
  const raw = line.trim().startsWith('{') ? tryParse(line) : undefined;
  const text = (v: unknown) => (typeof v === 'string' ? harnessText(v) : '');
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
    const e = raw as Record<string, unknown>;
    switch (e.type) {
      case 'message':
        if (typeof e.text === 'string')
          return {
            type: 'message',
            role: typeof e.role === 'string' ? harnessText(e.role) : 'assistant',
            text: text(e.text),
          };
        break;
      case 'action':
        if (typeof e.kind === 'string' && /^[a-z][a-z0-9_.-]{0,63}$/.test(e.kind))
          return {
            type: 'action',
            kind: e.kind,
            input:
              e.input && typeof e.input === 'object' && !Array.isArray(e.input)
                ? harnessJson(e.input as Record<string, unknown>)
                : {},
          };
        break;
      case 'status':
        if (e.state === 'BLOCKED')
          return {
            type: 'status',
            state: 'BLOCKED',
            message: text(e.message) || 'The agent is waiting for input',
          };
        break;
      case 'artifact': {
        // A worker's report carries the event as parsed here ({type, artifact}); a harness writes it flat.
        const source = harnessJson(
          e.artifact && typeof e.artifact === 'object' ? (e.artifact as Record<string, unknown>) : e,
        );
        if (parseArtifactReport(source)) return { type: 'artifact', artifact: source as WireArtifact };
        break;
      }
      case 'usage':
        // A malformed report is kept as a transcript line (below), never summed.
        if (
          typeof e.model_id === 'string' &&
          /^[\x21-\x7e]{1,200}$/.test(e.model_id) &&
          isCount(e.input_tokens) &&
          isCount(e.output_tokens) &&
          isOptionalCount(e.cache_read_tokens) &&
          isOptionalCount(e.cache_write_tokens)
        )
          return {
            type: 'usage',
            model_id: e.model_id,
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
            ...(e.cache_read_tokens !== undefined
              ? { cache_read_tokens: e.cache_read_tokens as number }
              : {}),
            ...(e.cache_write_tokens !== undefined
              ? { cache_write_tokens: e.cache_write_tokens as number }
              : {}),
          };
        break;
      case 'result':
        return {
          type: 'result',
          status: e.status === 'failed' ? 'failed' : 'succeeded',
          message: text(e.message),
        };
    }
  }
  return { type: 'transcript', stream: 'stdout', text: harnessText(line) };
}

/** An artifact as the harness wrote it (checked by parseArtifactReport; content in base64 `data`). */
export type WireArtifact = Record<string, unknown> & { artifact_type: ArtifactReport['artifact_type'] };

function tryParse(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/**
 * What an event costs against its run's transcript budget: the UTF-8 bytes of its JSON as the worker
 * reports it (an artifact with its content). The worker and the service count alike; the service
 * counts what it receives itself.
 */
export const eventBytes = (event: HarnessEvent): number => Buffer.byteLength(JSON.stringify(event));

export function encodeInput(input: HarnessInput): string {
  return `${JSON.stringify(input)}\n`;
}
