import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error plain JS example without type declarations
import { translate } from '../examples/harness/claude-stream.js';
import { fromRoot } from '../src/common/paths.js';
import { parseHarnessLine } from '../src/workers/harness-protocol.js';

const fixture = fromRoot('test/fixtures/claude-stream.jsonl');
const events = readFileSync(fixture, 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));

describe('Claude Code stream-json adapter', () => {
  it('turns a recorded session into messages, skill loads, tool actions and a result', () => {
    const out = events.flatMap((e) => translate(e));
    expect(out).toEqual([
      {
        type: 'message',
        role: 'system',
        text: 'Claude Code session 8f1c2a9e-0d5b-4c7e-9a51-3f2b6c1d7e40 (claude-sonnet-4-5)',
      },
      {
        type: 'message',
        role: 'assistant',
        text: "I'll start by reading the triage skill and the event payload.",
      },
      {
        type: 'action',
        kind: 'read_skill',
        input: { skill_path: 'factory-skills/acme/skills/triage/SKILL.md' },
      },
      { type: 'action', kind: 'read_skill', input: { skill_name: 'pr-comments' } },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'Bash',
          id: 'toolu_01C',
          input: { command: 'cat event-payload.json', description: 'Read the webhook payload' },
        },
      },
      { type: 'message', role: 'assistant', text: 'The issue is a crash in the API: labelled area/api.' },
      { type: 'result', status: 'succeeded', message: 'The issue is a crash in the API: labelled area/api.' },
    ]);
    // Every translated event is a protocol event the worker understands (nothing falls to the transcript).
    for (const e of out) expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it('reports an error result as failed', () => {
    expect(translate({ type: 'result', subtype: 'error_max_turns', is_error: true })).toEqual([
      { type: 'result', status: 'failed', message: 'error_max_turns' },
    ]);
  });

  it('runs as a harness around a claude command, speaking the protocol on stdout', () => {
    const input = `${JSON.stringify({ type: 'prompt', run_id: 'r', prompt: 'Triage', followups: [], attachments: [] })}\n`;
    const r = spawnSync(process.execPath, [fromRoot('examples/harness/claude-code.js')], {
      input,
      env: { ...process.env, CLAUDE_COMMAND: `cat "${fixture}"; true` },
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => parseHarnessLine(l));
    expect(lines.map((l) => l.type)).toEqual([
      'message',
      'message',
      'action',
      'action',
      'action',
      'message',
      'result',
    ]);
  });
});
