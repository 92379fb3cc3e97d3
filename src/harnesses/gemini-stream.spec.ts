import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../common/paths.js';
import { parseHarnessLine } from '../workers/protocol/harness-protocol.js';
import { GeminiStream } from './gemini-stream.js';

/** A `gemini --output-format stream-json` stream recorded from the real CLI (0.61.0) against a Gemini API stub. */
const recorded = (name: string) =>
  readFileSync(fromRoot('test/fixtures', name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('Gemini CLI stream-json translation', () => {
  it('turns a recorded turn into messages, a skill read, tool calls and results, a file, usage and the end', () => {
    const stream = new GeminiStream();
    const out = recorded('gemini-stream.jsonl').flatMap((e) => stream.translate(e));
    const shell = 'run_shell_command__run_shell_command_1795748839962_0';
    const write = 'write_file__write_file_1795748840604_0';
    const read = 'read_file__read_file_1795748840732_0';
    const answer = 'Labelled the issue area/api and left notes/triage.md.';
    expect(out).toEqual([
      { type: 'session', id: '02250a97-54d7-4edf-9b93-e28939a87751' },
      { type: 'message', role: 'assistant', text: 'Reading the skill first.' },
      {
        type: 'action',
        kind: 'read_skill',
        input: { skill_path: 'factory-skills/acme/skills/triage/SKILL.md' },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'run_shell_command',
          id: shell,
          input: {
            command: 'cat factory-skills/acme/skills/triage/SKILL.md',
            description: 'Read the triage skill',
          },
        },
      },
      { type: 'action', kind: 'tool_result', input: { id: shell, output: '# Triage skill' } },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'write_file',
          id: write,
          input: { file_path: 'notes/triage.md', content: '# Triage\narea/api\n' },
        },
      },
      { type: 'action', kind: 'tool_result', input: { id: write, output: '' } },
      { type: 'wrote', path: 'notes/triage.md' },
      {
        type: 'action',
        kind: 'tool_call',
        input: { tool: 'read_file', id: read, input: { file_path: 'missing.txt' } },
      },
      {
        type: 'action',
        kind: 'tool_result',
        input: { id: read, output: 'File not found: /tmp/cgx/grws/missing.txt', is_error: true },
      },
      // Two deltas, one message.
      { type: 'message', role: 'assistant', text: answer },
      {
        type: 'usage',
        model_id: 'gemini-2.5-flash',
        input_tokens: 10000,
        output_tokens: 100,
        cache_read_tokens: 1000,
      },
      { type: 'turn_end', ok: true, message: answer },
    ]);
    for (const e of out.filter((e) => !['session', 'wrote', 'turn_end', 'usage'].includes(e.type)))
      expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it('ends a turn the provider refused with what to fix, and reports no usage it did not have', () => {
    const stream = new GeminiStream({ secretName: 'gemini-key' });
    const out = recorded('gemini-stream-401.jsonl').flatMap((e) => stream.translate(e));
    expect(out.filter((e) => e.type === 'usage')).toEqual([]);
    expect(out.at(-1)).toMatchObject({ type: 'turn_end', ok: false });
    expect((out.at(-1) as { message: string }).message).toMatch(
      /^the model provider refused the API key: check the team secret "gemini-key" holds a valid Gemini API key \(Gemini CLI: \[API Error: .*401/,
    );
  });

  it('reports an activated skill by name, and a spent daily quota as a quota', () => {
    const stream = new GeminiStream();
    expect(
      stream.translate({
        type: 'tool_use',
        tool_name: 'activate_skill',
        tool_id: 't1',
        parameters: { name: 'triage' },
      })[0],
    ).toEqual({ type: 'action', kind: 'read_skill', input: { skill_name: 'triage' } });
    const end = stream.translate({
      type: 'result',
      status: 'error',
      error: { type: 'TerminalQuotaError', message: 'You have exhausted your daily quota on this model.' },
    });
    expect((end.at(-1) as { message: string }).message).toMatch(
      /^the model provider is rate-limiting this key or its quota is spent/,
    );
  });
});
