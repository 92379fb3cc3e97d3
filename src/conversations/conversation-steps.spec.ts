import { describe, expect, it } from 'vitest';
import {
  actionCategory,
  conversationItems,
  conversationSteps,
  type ConversationEvent,
} from './conversation-steps.js';

const at = (s: number) => new Date(Date.UTC(2026, 10, 1, 10, 0, s));
let next = 0;
const message = (execution: number, role: string, text: string): ConversationEvent => ({
  id: String(++next),
  type: 'message',
  role,
  kind: null,
  body: { text },
  execution,
  created_at: at(next),
});
const action = (execution: number, kind: string, input: Record<string, unknown>): ConversationEvent => ({
  id: String(++next),
  type: 'action',
  role: null,
  kind,
  body: { input },
  execution,
  created_at: at(next),
});

describe('a run’s conversation as the clients’ steps', () => {
  const events = [
    message(1, 'user', 'Fix the test'),
    message(1, 'assistant', 'Looking'),
    action(1, 'tool_call', { tool: 'Bash', id: 'toolu_1', input: { command: 'npm test' } }),
    action(1, 'tool_result', { id: 'toolu_1', output: '1 failing', is_error: true }),
    action(1, 'read_skill', { skill_path: 'skills/triage/SKILL.md' }),
    message(2, 'user', 'And the docs'),
    message(2, 'harness-said', 'Done'),
  ];
  const steps = conversationSteps('run-1', events);

  it('makes one step per execution, with the times of its first and last event', () => {
    expect(steps).toHaveLength(2);
    expect(steps[0]).toMatchObject({ started_at: at(1).toISOString(), completed_at: at(5).toISOString() });
    expect(steps[0]!.steps).toEqual([]);
    expect(conversationSteps('run-1', events).map((s) => s.id)).toEqual(steps.map((s) => s.id));
    expect(new Set(steps.map((s) => s.id)).size).toBe(2);
  });

  it('groups consecutive blocks of a role, pairs a tool call with its result, and maps roles to the enum', () => {
    expect(steps[0]!.messages.map((m) => [m.role, m.content.map((c) => c.type)])).toEqual([
      ['user', ['text']],
      ['assistant', ['text', 'action']],
      ['tool', ['action_result']],
      ['assistant', ['action']],
    ]);
    const [, said, result, skill] = steps[0]!.messages;
    expect(said!.content[1]).toMatchObject({
      type: 'action',
      id: 'toolu_1',
      category: 'command',
      name: 'Bash',
      input: { command: 'npm test' },
    });
    expect(result!.content[0]).toMatchObject({
      type: 'action_result',
      action_id: 'toolu_1',
      category: 'command',
      name: 'Bash',
      output: { output: '1 failing', is_error: true },
      state: 'failed',
    });
    expect(skill!.content[0]).toMatchObject({ category: 'skill', name: 'read_skill' });
    // A role outside the clients' enum is the agent's.
    expect(steps[1]!.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
  });

  it('keeps factoryd’s flat list beside it', () => {
    expect(conversationItems(events.slice(2, 3))).toEqual([
      {
        type: 'action',
        kind: 'tool_call',
        input: { tool: 'Bash', id: 'toolu_1', input: { command: 'npm test' } },
        execution: 1,
        created_at: at(3).toISOString(),
      },
    ]);
  });

  it('names categories from the tool or action name, an unknown one an integration', () => {
    expect(
      ['Edit', 'Grep', 'WebFetch', 'run_command', 'computer_click', 'mcp__linear__create_issue', 'plan'].map(
        actionCategory,
      ),
    ).toEqual(['files', 'search', 'search', 'command', 'computer', 'integration', 'documents']);
  });
});
