import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../common/paths.js';
import { parseHarnessLine } from '../workers/protocol/harness-protocol.js';
import { CodexStream } from './codex-stream.js';

/** A `codex exec --json` stream recorded from the real CLI (0.171.0) against a Responses API stub. */
const recorded = (name: string) =>
  readFileSync(fromRoot('test/fixtures', name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

const runnerOwn = ['session', 'wrote', 'turn_end', 'fatal'];

describe('Codex exec --json translation', () => {
  it('turns a recorded session of two turns into a skill read, tool calls and results, a file, messages, per-turn usage and ends', () => {
    const stream = new CodexStream({ modelId: 'gpt-5.5' });
    const out = recorded('codex-exec.jsonl').flatMap((e) => stream.translate(e));
    const session = '01a21af8-54d2-7c63-afd7-57fbfb33226d';
    const command = "/bin/bash -lc 'cat factory-skills/acme/skills/triage/SKILL.md || true'";
    const notes = '/tmp/cgx/rws/notes/triage.md';
    const answer = 'Labelled the issue area/api and left notes/triage.md.';
    expect(out).toEqual([
      { type: 'session', id: session },
      {
        type: 'action',
        kind: 'read_skill',
        input: { skill_path: 'factory-skills/acme/skills/triage/SKILL.md' },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: { tool: 'exec_command', id: 'item_0', input: { command } },
      },
      {
        type: 'action',
        kind: 'tool_result',
        input: { id: 'item_0', output: '# Triage skill\n', exit_code: 0 },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: { tool: 'apply_patch', id: 'item_1', input: { changes: [{ path: notes, kind: 'add' }] } },
      },
      { type: 'action', kind: 'tool_result', input: { id: 'item_1', output: `add ${notes}` } },
      { type: 'wrote', path: notes },
      { type: 'message', role: 'assistant', text: answer },
      // Three model calls of 1000, 2000 and 3000 input tokens: the first turn.
      { type: 'usage', model_id: 'gpt-5.5', input_tokens: 6000, output_tokens: 60, cache_read_tokens: 600 },
      { type: 'turn_end', ok: true, message: answer },
      // The resumed session: Codex reports the session's total (10000); this turn used 4000.
      { type: 'session', id: session },
      { type: 'message', role: 'assistant', text: 'Nothing more to do.' },
      { type: 'usage', model_id: 'gpt-5.5', input_tokens: 4000, output_tokens: 40, cache_read_tokens: 400 },
      { type: 'turn_end', ok: true, message: 'Nothing more to do.' },
    ]);
    // Every protocol event is one the worker understands (usage is the harness API's, parsed there).
    for (const e of out.filter((e) => ![...runnerOwn, 'usage'].includes(e.type)))
      expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it('stops a turn at the first refusal of the key, naming the secret, and says what to fix', () => {
    const stream = new CodexStream({ modelId: 'gpt-5.5', secretName: 'openai-key' });
    const out = recorded('codex-exec-401.jsonl').flatMap((e) => stream.translate(e));
    const fatal = out.find((e) => e.type === 'fatal') as { message: string };
    expect(fatal.message).toMatch(
      /^the model provider refused the API key: check the team secret "openai-key" holds a valid OpenAI API key \(Codex: Reconnecting\.\.\. 1\/5 \(unexpected status 401 Unauthorized/,
    );
    expect(out.at(-1)).toMatchObject({ type: 'turn_end', ok: false });
    expect(out.filter((e) => e.type === 'message')).toEqual([]);
  });

  it('explains a rate limit and a dropped stream differently', () => {
    const failed = (message: string) =>
      (new CodexStream().translate({ type: 'turn.failed', error: { message } })[0] as { message: string })
        .message;
    expect(failed('exceeded retry limit, last status: 429 Too Many Requests')).toMatch(
      /^the model provider is rate-limiting this key or its quota is spent \(HTTP 429\)/,
    );
    expect(
      failed(
        'stream disconnected before completion: Transport error: network error: error decoding response body',
      ),
    ).toMatch(
      /^the connection to the model provider failed or was cut \(check OPENAI_BASE_URL and the network\)/,
    );
    expect(failed('context window exceeded')).toBe(
      'Codex ended the turn with an error: context window exceeded',
    );
  });

  it('reports an MCP tool call that only completed, and ignores what it does not know', () => {
    const stream = new CodexStream();
    expect(
      stream.translate({
        type: 'item.completed',
        item: {
          id: 'item_3',
          type: 'mcp_tool_call',
          server: 'github',
          tool: 'get_issue',
          arguments: { n: 7 },
          result: { content: [{ type: 'text', text: 'Crash' }] },
          status: 'completed',
        },
      }),
    ).toEqual([
      {
        type: 'action',
        kind: 'tool_call',
        input: { tool: 'github.get_issue', id: 'item_3', input: { n: 7 } },
      },
      {
        type: 'action',
        kind: 'tool_result',
        input: { id: 'item_3', output: '[{"type":"text","text":"Crash"}]' },
      },
    ]);
    for (const e of [
      null,
      'x',
      { type: 'item.completed', item: { type: 'reasoning', text: 'hm' } },
      { type: 'item.started', item: { type: 'todo_list', items: [] } },
      {
        type: 'error',
        message: 'Reconnecting... 1/5 (exceeded retry limit, last status: 429 Too Many Requests)',
      },
      { type: 'new.kind' },
    ])
      expect(stream.translate(e)).toEqual([]);
  });
});
