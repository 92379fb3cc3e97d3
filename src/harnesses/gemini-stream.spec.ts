import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../common/paths.js';
import { parseHarnessLine } from '../workers/harness-protocol.js';
import { GeminiStream } from './gemini-stream.js';

/** A `gemini --output-format stream-json` stream recorded from the real CLI against test/support/model-stubs/gemini.ts. */
const recorded = (name: string) =>
  readFileSync(fromRoot('test/fixtures', name), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));

describe('Gemini CLI stream-json translation', () => {
  it('turns a recorded turn into messages, a skill load, tool actions with results, a file, usage and a result', () => {
    const stream = new GeminiStream();
    const out = recorded('gemini-stream.jsonl').flatMap((e) => stream.translate(e));
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
          id: 'run_shell_command__run_shell_command_1795748839962_0',
          input: {
            command: 'cat factory-skills/acme/skills/triage/SKILL.md',
            description: 'Read the triage skill',
          },
          result: { status: 'success', output: '# Triage skill' },
        },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'write_file',
          id: 'write_file__write_file_1795748840604_0',
          input: { file_path: 'notes/triage.md', content: '# Triage\narea/api\n' },
          result: { status: 'success', output: '' },
        },
      },
      { type: 'file_written', path: 'notes/triage.md' },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'read_file',
          id: 'read_file__read_file_1795748840732_0',
          input: { file_path: 'missing.txt' },
          result: { status: 'error', error: 'File not found: /tmp/cgx/grws/missing.txt' },
        },
      },
      // Two deltas, one message.
      { type: 'message', role: 'assistant', text: 'Labelled the issue area/api and left notes/triage.md.' },
      {
        type: 'usage',
        model_id: 'gemini-2.5-flash',
        input_tokens: 10000,
        output_tokens: 100,
        cache_read_tokens: 1000,
      },
      {
        type: 'result',
        status: 'succeeded',
        message: 'Labelled the issue area/api and left notes/triage.md.',
      },
    ]);
    for (const e of out.filter((e) => !['session', 'file_written', 'usage'].includes(e.type)))
      expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it('ends a turn the provider refused with what to fix, and reports no usage it did not have', () => {
    const out = recorded('gemini-stream-401.jsonl').flatMap((e) => new GeminiStream().translate(e));
    expect(out.filter((e) => e.type === 'usage')).toEqual([]);
    const end = out.at(-1) as { type: string; status: string; message: string };
    expect(end).toMatchObject({ type: 'result', status: 'failed' });
    expect(end.message).toMatch(
      /^Gemini rejected the API key: check the team secret that provides GEMINI_API_KEY .*401/,
    );
  });

  it('reports an activated skill by name and a daily quota as a quota', () => {
    const stream = new GeminiStream();
    stream.translate({
      type: 'tool_use',
      tool_name: 'activate_skill',
      tool_id: 't1',
      parameters: { name: 'triage' },
    });
    expect(
      stream.translate({ type: 'tool_result', tool_id: 't1', status: 'success', output: 'ok' })[0],
    ).toEqual({
      type: 'action',
      kind: 'read_skill',
      input: { skill_name: 'triage' },
    });
    const end = new GeminiStream().translate({
      type: 'result',
      status: 'error',
      error: { type: 'TerminalQuotaError', message: 'You have exhausted your daily quota on this model.' },
    });
    expect((end.at(-1) as { message: string }).message).toMatch(
      /^Gemini refused the request for rate limit or quota/,
    );
  });
});
