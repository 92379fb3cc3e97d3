import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { translateClaude } from '../src/harnesses/claude-stream.js';
import { parseHarnessLine } from '../src/workers/protocol/harness-protocol.js';
import { eventually } from './support/eventually.js';

const fixture = fromRoot('test/fixtures/claude-stream.jsonl');
const events = readFileSync(fixture, 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l));
const SESSION = '8f1c2a9e-0d5b-4c7e-9a51-3f2b6c1d7e40';

describe('Claude Code stream-json translator', () => {
  it('turns a recorded session into messages, skill loads, tool calls and results, usage and the turn end', () => {
    const out = events.flatMap((e) => translateClaude(e)).filter((e) => e.type !== 'session');
    expect(out).toEqual([
      { type: 'message', role: 'system', text: `Claude Code session ${SESSION} (claude-sonnet-4-5)` },
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
      {
        type: 'action',
        kind: 'tool_result',
        input: { id: 'toolu_01A', output: '---\nname: triage\n---\nLabel issues by area.' },
      },
      { type: 'action', kind: 'read_skill', input: { skill_name: 'pr-comments' } },
      {
        type: 'action',
        kind: 'tool_result',
        input: { id: 'toolu_01B', output: 'Launching skill: pr-comments' },
      },
      {
        type: 'action',
        kind: 'tool_call',
        input: {
          tool: 'Bash',
          id: 'toolu_01C',
          input: { command: 'cat event-payload.json', description: 'Read the webhook payload' },
        },
      },
      { type: 'action', kind: 'tool_result', input: { id: 'toolu_01C', output: '{"action":"opened"}' } },
      { type: 'message', role: 'assistant', text: 'The issue is a crash in the API: labelled area/api.' },
      ...out.filter((e) => e.type === 'usage'),
      { type: 'turn_end', ok: true, message: 'The issue is a crash in the API: labelled area/api.' },
    ]);
    // The session id is the runner's, to resume the next turn.
    expect(translateClaude(events[0])[0]).toEqual({ type: 'session', id: SESSION });
    // Every protocol event is one the worker understands (nothing falls to the transcript).
    for (const e of out.filter((e) => !['turn_end', 'usage'].includes(e.type)))
      expect(parseHarnessLine(JSON.stringify(e)).type).toBe(e.type);
  });

  it('reports a file the CLI wrote, for its artifact', () => {
    const write = {
      type: 'assistant',
      message: {
        content: [
          { type: 'tool_use', id: 't1', name: 'Write', input: { file_path: '/w/a.md', content: 'x' } },
        ],
      },
    };
    expect(translateClaude(write)).toContainEqual({ type: 'wrote', path: '/w/a.md' });
  });

  it('reports the turn’s usage per model, as the provider counted it', () => {
    const result = {
      type: 'result',
      subtype: 'success',
      result: 'ok',
      modelUsage: {
        'claude-sonnet-4-5[1m]': {
          inputTokens: 10,
          outputTokens: 2,
          cacheReadInputTokens: 5,
          cacheCreationInputTokens: 0,
        },
      },
    };
    expect(translateClaude(result)).toContainEqual({
      type: 'usage',
      model_id: 'claude-sonnet-4-5',
      input_tokens: 10,
      output_tokens: 2,
      cache_read_tokens: 5,
    });
  });

  it('stops at once on a refused key, naming the secret; reports other provider failures with what to do', () => {
    const retry = { type: 'system', subtype: 'api_retry', error_status: 401, attempt: 1 };
    expect(translateClaude(retry, { secretName: 'anthropic' })).toEqual([
      {
        type: 'fatal',
        message: expect.stringMatching(/refused the API key \(HTTP 401\): check the team secret "anthropic"/),
      },
    ]);
    const failed = (status: number | null, result: string) =>
      translateClaude({
        type: 'result',
        subtype: 'success',
        is_error: true,
        api_error_status: status,
        result,
      }).at(-1);
    expect(failed(429, 'API Error: 429')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/rate-limiting/),
    });
    expect(failed(529, 'API Error: 529')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/overloaded/),
    });
    expect(failed(null, 'API Error: Unable to connect to API (ECONNRESET)')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/connection to the model provider failed or was cut.*ECONNRESET/),
    });
    expect(translateClaude({ type: 'result', subtype: 'error_max_turns', is_error: true }).at(-1)).toEqual({
      type: 'turn_end',
      ok: false,
      message: 'Claude Code ended the turn with an error (error_max_turns)',
    });
  });

  it('runs as a harness around a claude executable (the example points at the built-in adapter)', () => {
    const input = `${JSON.stringify({ type: 'prompt', run_id: 'r', prompt: 'Triage', followups: [], attachments: [] })}\n`;
    const r = spawnSync(process.execPath, [fromRoot('examples/harness/claude-code.js')], {
      input,
      env: { ...process.env, CLAUDE_COMMAND: fromRoot('test/fixtures/fake-claude') },
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => `${l.type}${l.kind ? `:${l.kind}` : ''}`)).toEqual([
      'message',
      'message',
      'action:read_skill',
      'action:tool_result',
      'action:read_skill',
      'action:tool_result',
      'action:tool_call',
      'action:tool_result',
      'message',
      'result',
    ]);
    expect(lines.at(-1)).toEqual({
      type: 'result',
      status: 'succeeded',
      message: 'The issue is a crash in the API: labelled area/api.',
    });
    // The raw stream is the transcript: every line of it on stderr.
    expect(r.stderr.trim().split('\n')).toHaveLength(events.length);
  });
});

describe('the adapter runner', () => {
  it('interrupt stops the turn’s whole process group, reports BLOCKED, and a follow-up resumes the session', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'factoryd-adapter-'));
    const log = join(dir, 'args.log');
    const sleep = `300.${process.pid}${Date.now() % 1000}`;
    const adapter = spawn(process.execPath, [fromRoot('dist/harnesses/claude.harness.js')], {
      cwd: dir,
      env: {
        ...process.env,
        FACTORYD_HARNESS_CLI: fromRoot('test/fixtures/fake-claude-slow'),
        FACTORYD_WORKSPACE: dir,
        FAKE_CLAUDE_LOG: log,
        FAKE_CLAUDE_SLEEP: sleep,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: any[] = [];
    createInterface({ input: adapter.stdout! }).on('line', (l) => out.push(JSON.parse(l)));
    const exited = new Promise<number | null>((r) => adapter.on('exit', (code) => r(code)));
    adapter.stdin!.write(
      `${JSON.stringify({ type: 'prompt', run_id: 'r', prompt: 'Go', followups: [], attachments: [] })}\n`,
    );
    await eventually(() => sleeping(sleep).length === 1, 'the turn running, with its child');
    adapter.stdin!.write('{"type":"interrupt"}\n');
    await eventually(() => out.some((e) => e.type === 'status'), 'BLOCKED reported', { timeoutMs: 5000 });
    expect(out.find((e) => e.type === 'status')).toEqual({
      type: 'status',
      state: 'BLOCKED',
      message: 'interrupted; send a follow-up to continue',
    });
    expect(sleeping(sleep)).toEqual([]); // the CLI's child went with its group
    expect(out.some((e) => e.type === 'result')).toBe(false); // the run is not over
    adapter.stdin!.write(`${JSON.stringify({ type: 'followup', message: 'Go on' })}\n`);
    expect(await exited).toBe(0);
    const calls = readFileSync(log, 'utf8').trim().split('\n');
    expect(calls).toHaveLength(2);
    expect(calls[1]).toMatch(/^-p Go on .*--resume sess-1/);
    expect(out.at(-1)).toEqual({ type: 'result', status: 'succeeded', message: 'resumed' });
  });
});

describe('the adapter runner stopping its CLI', () => {
  // The CLI's group gets SIGTERM first and SIGKILL 2 s later (docs/harnesses.md), whether the run was
  // cancelled (`cancel` on stdin) or the worker stops the harness (SIGTERM to the adapter).
  it.each([
    ['a cancel on stdin', (a: ChildProcess) => a.stdin!.write('{"type":"cancel"}\n'), {}],
    ['SIGTERM from the worker', (a: ChildProcess) => a.kill('SIGTERM'), { FACTORYD_KILL_GRACE_MS: '3000' }],
  ])('%s: SIGTERM to the CLI’s group, SIGKILL after the grace period, exit 130', async (_, stop, env) => {
    const dir = mkdtempSync(join(tmpdir(), 'factoryd-adapter-'));
    const log = join(dir, 'cli.log');
    const sleep = `301.${process.pid}${Date.now() % 1000}`;
    const adapter = spawn(process.execPath, [fromRoot('dist/harnesses/claude.harness.js')], {
      cwd: dir,
      env: {
        ...process.env,
        FACTORYD_HARNESS_CLI: fromRoot('test/fixtures/fake-claude-stubborn'),
        FACTORYD_WORKSPACE: dir,
        FAKE_CLAUDE_LOG: log,
        FAKE_CLAUDE_SLEEP: sleep,
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    adapter.stdout!.resume();
    adapter.stderr!.resume();
    const exited = new Promise<number | null>((r) => adapter.on('exit', (code) => r(code)));
    adapter.stdin!.write(
      `${JSON.stringify({ type: 'prompt', run_id: 'r', prompt: 'Go', followups: [], attachments: [] })}\n`,
    );
    await eventually(() => sleeping(sleep).length === 1, 'the turn running, with its child');
    const stoppedAt = Date.now();
    stop(adapter);
    expect(await exited).toBe(130);
    const took = Date.now() - stoppedAt;
    // It was asked first (its trap noted the SIGTERM) and given the grace period before SIGKILL.
    expect(readFileSync(log, 'utf8')).toContain('TERM');
    expect(took).toBeGreaterThanOrEqual(1900);
    expect(took).toBeLessThan(5000);
    await eventually(() => sleeping(sleep).length === 0, 'nothing of the CLI’s group left', {
      timeoutMs: 2000,
    });
    rmSync(dir, { recursive: true, force: true });
  });
});

/** Processes running `sleep <duration>` (a duration no other process shares). */
function sleeping(duration: string): string[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8') === `sleep\0${duration}\0`;
      } catch {
        return false;
      }
    });
}
