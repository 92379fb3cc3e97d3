import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../common/paths.js';
import { parseHarnessLine } from '../workers/harness-protocol.js';
import { CodexStream } from './codex-stream.js';

/** A `codex exec --json` stream recorded from the real CLI against test/support/model-stubs/openai-responses.ts. */
const recorded = (name: string) =>
  readFileSync(fromRoot('test/fixtures', name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('Codex exec --json translation', () => {
  it('turns a recorded session of two turns into actions, a file, messages, per-turn usage and results', () => {
    const stream = new CodexStream('gpt-5.5');
    const out = recorded('codex-exec.jsonl').flatMap((e) => stream.translate(e));
    const session = '01a21af8-54d2-7c63-afd7-57fbfb33226d';
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
        input: {
          tool: 'exec_command',
          id: 'item_0',
          input: { command: "/bin/bash -lc 'cat factory-skills/acme/skills/triage/SKILL.md || true'" },
          result: { status: 'completed', exit_code: 0, output: '# Triage skill\n' },
        },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'apply_patch',
          id: 'item_1',
          input: { changes: [{ path: '/tmp/cgx/rws/notes/triage.md', kind: 'add' }] },
          result: { status: 'completed' },
        },
      },
      { type: 'file_written', path: '/tmp/cgx/rws/notes/triage.md' },
      { type: 'message', role: 'assistant', text: 'Labelled the issue area/api and left notes/triage.md.' },
      // Three model calls of 1000, 2000 and 3000 input tokens: the first turn.
      { type: 'usage', model_id: 'gpt-5.5', input_tokens: 6000, output_tokens: 60, cache_read_tokens: 600 },
      {
        type: 'result',
        status: 'succeeded',
        message: 'Labelled the issue area/api and left notes/triage.md.',
      },
      // The resumed session: Codex reports the session's total (10000); the turn used 4000.
      { type: 'session', id: session },
      { type: 'message', role: 'assistant', text: 'Nothing more to do.' },
      { type: 'usage', model_id: 'gpt-5.5', input_tokens: 4000, output_tokens: 40, cache_read_tokens: 400 },
      { type: 'result', status: 'succeeded', message: 'Nothing more to do.' },
    ]);
    // Every protocol event is one the worker understands (the adapter's notes excepted; usage is new).
    for (const e of out.filter((e) => !['session', 'file_written', 'usage'].includes(e.type)))
      expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it("ends a turn the provider refused with what to fix and the CLI's own words", () => {
    const stream = new CodexStream('gpt-5.5');
    const out = recorded('codex-exec-401.jsonl').flatMap((e) => stream.translate(e));
    const end = out.at(-1)!;
    expect(end).toMatchObject({ type: 'result', status: 'failed' });
    expect((end as { message: string }).message).toMatch(
      /^OpenAI rejected the API key: check the team secret that provides OPENAI_API_KEY .*\(unexpected status 401 Unauthorized/,
    );
    // The retries ("Reconnecting... n/5") are no conversation.
    expect(out.filter((e) => e.type === 'message')).toEqual([]);
  });

  it('explains a rate limit and a dropped stream differently', () => {
    const failed = (message: string) =>
      (new CodexStream('m').translate({ type: 'turn.failed', error: { message } })[0] as { message: string })
        .message;
    expect(failed('exceeded retry limit, last status: 429 Too Many Requests')).toMatch(
      /^OpenAI refused the request for rate limit or quota/,
    );
    expect(
      failed(
        'stream disconnected before completion: Transport error: network error: error decoding response body',
      ),
    ).toMatch(/^The connection to OpenAI dropped before its answer was complete/);
  });

  it('reports an MCP tool call with its arguments and result, and ignores what it does not know', () => {
    const stream = new CodexStream('m');
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
        input: {
          tool: 'github.get_issue',
          id: 'item_3',
          input: { n: 7 },
          result: { status: 'completed', output: '[{"type":"text","text":"Crash"}]' },
        },
      },
    ]);
    for (const e of [
      null,
      'x',
      { type: 'item.completed', item: { type: 'reasoning', text: 'hm' } },
      { type: 'turn.started' },
      { type: 'new.kind' },
    ])
      expect(stream.translate(e)).toEqual([]);
  });
});
