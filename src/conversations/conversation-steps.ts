import { uuidFrom } from '../common/ids.js';
import type { ConversationMessage } from '../contract/generated.js';

/**
 * A run's recorded conversation (run_events of type message and action) in two shapes: factoryd's flat
 * `messages`, and the Oz clients' `steps` (RunGetConversationResponse: one ConversationStep per
 * execution of the run, its messages made of text, action and action_result blocks). Pure.
 */

/** One recorded message or action, as run_events keeps it. */
export interface ConversationEvent {
  id: string;
  type: 'message' | 'action';
  role: string | null;
  kind: string | null;
  body: Record<string, unknown>;
  execution: number;
  created_at: Date;
}

/** An entry of the flat list (schemas/api/conversation-message.schema.json). */
export type ConversationItem = ConversationMessage;

/** factoryd's flat list: each message and action with its execution. */
export function conversationItems(events: ConversationEvent[]): ConversationItem[] {
  return events.map((e) =>
    e.type === 'message'
      ? {
          type: 'message',
          role: e.role ?? 'assistant',
          text: String(e.body.text ?? ''),
          execution: e.execution,
          created_at: e.created_at.toISOString(),
        }
      : {
          type: 'action',
          kind: e.kind ?? '',
          input: inputOf(e),
          execution: e.execution,
          created_at: e.created_at.toISOString(),
        },
  );
}

const ROLES = ['user', 'assistant', 'tool', 'system'] as const;
type Role = (typeof ROLES)[number];

/** The clients' action categories. */
export const ACTION_CATEGORIES = [
  'command',
  'files',
  'search',
  'integration',
  'documents',
  'computer',
  'review',
  'skill',
] as const;
type Category = (typeof ACTION_CATEGORIES)[number];

/**
 * An action's category by its name: a vendor CLI's tool (`Bash`, `Edit`, `Grep`, an MCP tool) or a
 * harness's own action kind. A name that says nothing of the kind is an integration (an MCP tool's).
 */
const CATEGORY_BY_NAME: Array<[RegExp, Category]> = [
  [/skill/i, 'skill'],
  [/bash|shell|command|exec|terminal/i, 'command'],
  [/grep|glob|search|find|fetch|web/i, 'search'],
  [/read|write|edit|file|patch|notebook|ls$/i, 'files'],
  [/computer|screenshot|click|browser/i, 'computer'],
  [/review/i, 'review'],
  [/plan|doc|artifact|todo/i, 'documents'],
];

export function actionCategory(name: string): Category {
  return CATEGORY_BY_NAME.find(([pattern]) => pattern.test(name))?.[1] ?? 'integration';
}

type ContentBlock =
  | { type: 'text'; text: string; message_id: string }
  | {
      type: 'action';
      id: string;
      category: Category;
      name: string;
      input: Record<string, unknown>;
      message_id: string;
    }
  | {
      type: 'action_result';
      action_id: string;
      category: Category;
      name: string;
      output: Record<string, unknown>;
      state: 'completed' | 'failed';
      message_id: string;
    };

interface StepMessage {
  role: Role;
  content: ContentBlock[];
  message_ids: string[];
  timestamp: string;
}

export interface ConversationStep {
  id: string;
  messages: StepMessage[];
  steps: ConversationStep[];
  started_at?: string;
  completed_at?: string;
}

/**
 * The clients' steps: one per execution (a follow-up that continues an ended run starts the next),
 * consecutive blocks of one role in one message. A vendor CLI's tool call and its result pair up by
 * the call's id; any other action is a call of its own kind. Ids are stable: the run and execution for
 * a step, the recorded event for a block.
 */
export function conversationSteps(runId: string, events: ConversationEvent[]): ConversationStep[] {
  const steps = new Map<number, ConversationStep>();
  const calls = new Map<string, { name: string; category: Category }>();
  for (const e of events) {
    let step = steps.get(e.execution);
    if (!step) {
      step = { id: uuidFrom(`conversation-step:${runId}:${e.execution}`), messages: [], steps: [] };
      steps.set(e.execution, step);
    }
    const [role, block] = blockOf(e, calls);
    const at = e.created_at.toISOString();
    const last = step.messages.at(-1);
    if (last?.role === role) {
      last.content.push(block);
      last.message_ids.push(block.message_id);
    } else step.messages.push({ role, content: [block], message_ids: [block.message_id], timestamp: at });
    step.started_at ??= at;
    step.completed_at = at;
  }
  return [...steps.values()];
}

function blockOf(
  e: ConversationEvent,
  calls: Map<string, { name: string; category: Category }>,
): [Role, ContentBlock] {
  const messageId = uuidFrom(`run-event:${e.id}`);
  if (e.type === 'message') {
    const role = (ROLES as readonly string[]).includes(e.role ?? '') ? (e.role as Role) : 'assistant';
    return [role, { type: 'text', text: String(e.body.text ?? ''), message_id: messageId }];
  }
  const input = inputOf(e);
  const callId = typeof input.id === 'string' ? input.id : undefined;
  if (e.kind === 'tool_result' && callId) {
    const call = calls.get(callId) ?? { name: 'tool', category: 'integration' as const };
    const { id: _id, ...output } = input;
    return [
      'tool',
      {
        type: 'action_result',
        action_id: callId,
        ...call,
        output,
        state: input.is_error ? 'failed' : 'completed',
        message_id: messageId,
      },
    ];
  }
  const isToolCall = e.kind === 'tool_call' && typeof input.tool === 'string';
  const name = isToolCall ? (input.tool as string) : (e.kind ?? 'action');
  const category = actionCategory(name);
  const id = callId ?? messageId;
  if (isToolCall) calls.set(id, { name, category });
  return [
    'assistant',
    {
      type: 'action',
      id,
      category,
      name,
      input: isToolCall ? objectOr(input.input) : input,
      message_id: messageId,
    },
  ];
}

function inputOf(e: ConversationEvent): Record<string, unknown> {
  return objectOr(e.body.input);
}

function objectOr(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
