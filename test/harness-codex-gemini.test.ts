import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuiltInHarness } from '../src/harnesses/harness-types.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { artifactText } from './support/artifacts.js';
import { eventually } from './support/eventually.js';
import { testCli, TEST_HARNESSES_DIR } from './support/harness-clis.js';
import { startGeminiStub, type GeminiTurn } from './support/model-stubs/gemini.js';
import { startOpenAIResponsesStub, type OpenAITurn } from './support/model-stubs/openai-responses.js';
import type { RecordedRequest, ScriptStep } from './support/model-stubs/recording-server.js';
import { runIn, startTestService, type TestService } from './support/service.js';

// The real Codex and Gemini CLIs (installed from npm into the tests' cache), run by the built-in
// harnesses in the real service's workers, against their providers' API stubs on loopback. One
// specification, the differences per CLI in the table below.

type Turn = OpenAITurn | GeminiTurn;
interface Stub {
  url: string;
  modelRequests(): RecordedRequest[];
  script(...steps: ScriptStep<any>[]): void;
  close(): Promise<void>;
}

interface Cli {
  type: Extract<BuiltInHarness, 'codex' | 'gemini'>;
  baseUrlVariable: string;
  start(): Promise<Stub>;
  /** The model's turns that write hello.txt and commit it (in the CLI's own tools). */
  writeAndCommit: Turn[];
  /** The provider's auth header of a request (the key, as the provider reads it). */
  keyOf(req: RecordedRequest): string | undefined;
  /** The tool names the conversation shows for writeAndCommit's calls. */
  tools: string[];
  model: string;
}

const COMMIT =
  'git init -q && git add hello.txt && git -c user.email=a@example.com -c user.name=agent commit -qm "Add hello" && git log --oneline';

const CLIS: Cli[] = [
  {
    type: 'codex',
    baseUrlVariable: 'OPENAI_BASE_URL',
    start: startOpenAIResponsesStub,
    writeAndCommit: [
      // Codex writes files with its apply_patch tool (reported as a file change) and runs commands.
      {
        calls: [
          {
            custom: 'apply_patch',
            input: '*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n',
          },
        ],
        usage: { input: 1200, output: 40, cached: 200 },
      },
      { calls: [{ name: 'exec_command', arguments: { cmd: COMMIT } }], usage: { input: 1300, output: 30 } },
    ],
    keyOf: (r) => r.headers.authorization,
    tools: ['apply_patch', 'exec_command'],
    model: 'gpt-5.5',
  },
  {
    type: 'gemini',
    baseUrlVariable: 'GOOGLE_GEMINI_BASE_URL',
    start: startGeminiStub,
    writeAndCommit: [
      {
        calls: [{ name: 'write_file', args: { file_path: 'hello.txt', content: 'hello\n' } }],
        usage: { input: 1200, output: 40, cached: 200 },
      },
      {
        calls: [{ name: 'run_shell_command', args: { command: COMMIT, description: 'Commit hello.txt' } }],
        usage: { input: 1300, output: 30 },
      },
    ],
    keyOf: (r) => r.headers['x-goog-api-key'] as string | undefined,
    tools: ['write_file', 'run_shell_command'],
    model: 'gemini-2.5-flash',
  },
];

const ended = ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'];
/** Gemini CLI takes seconds to start on a busy machine: a run gets a minute to end. */
const WITHIN = { timeoutMs: 60_000 };

for (const c of CLIS) {
  const cli = testCli(c.type);
  const KEY = `test-${c.type}-key-${Math.random().toString(36).slice(2)}-secret`;
  const OTHER_KEY = `test-${c.type}-other-${Math.random().toString(36).slice(2)}`;
  let t: TestService;
  let stub: Stub;

  describe.skipIf(!cli.path)(
    `${c.type} as a built-in harness${cli.skip ? ` (skipped: ${cli.skip})` : ''}`,
    () => {
      beforeAll(async () => {
        stub = await c.start();
        // The operator's base URL, passed to this provider's harnesses only; the CLI from the tests' cache.
        process.env[c.baseUrlVariable] = stub.url;
        process.env.HARNESSES_DIR = TEST_HARNESSES_DIR;
        // Also the service's own setting: its egress proxy lets sandboxed harnesses reach only the
        // providers' base URLs the operator set (docs/security.md, "A harness's network").
        t = await startTestService({
          WORKER_CONCURRENCY: '2',
          HARNESS_KILL_GRACE_MS: '1000',
          [c.baseUrlVariable]: stub.url,
        });
        const secrets = t.service.app.get(SecretsService);
        await secrets.set(t.defaultTeam.id, 'provider-key', KEY);
        await secrets.set(t.defaultTeam.id, 'other-key', OTHER_KEY);
      });
      afterAll(async () => {
        await t?.stop();
        await stub?.close();
        delete process.env[c.baseUrlVariable];
      });

      const create = async (prompt: string, harness: Record<string, unknown> = {}, config = {}) => {
        const res = await t.call('POST', '/api/v1/agent/runs', {
          prompt,
          config: {
            harness: { type: c.type, auth_secret_name: 'provider-key', model_id: c.model, ...harness },
            ...config,
          },
        });
        expect(res.status).toBe(200);
        return res.body.run_id as string;
      };
      const conversation = async (id: string) =>
        (await t.call('GET', `/api/v1/agent/runs/${id}/conversation`)).body.messages as any[];
      const runEvents = async (id: string) =>
        (
          await t.service.db.query<{ body: string }>(
            `SELECT body::text AS body FROM run_events WHERE run_id = $1`,
            [id],
          )
        ).map((r) => r.body);
      const requestsOf = (marker: string) => stub.modelRequests().filter((r) => r.raw.includes(marker));

      it('runs a turn with tools: call and result in the conversation, the file an artifact, usage reported', async () => {
        stub.script(...c.writeAndCommit, {
          text: 'Wrote and committed hello.txt.',
          usage: { input: 1400, output: 20 },
        });
        const id = await create(
          'write-and-commit: add hello.txt and commit it',
          {},
          { base_prompt: 'base-prompt-marker' },
        );
        const run = await runIn(t, id, ended, undefined, WITHIN);
        expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
        expect(run.status_message.message).toBe('Wrote and committed hello.txt.');
        const file = run.artifacts.find((a: any) => a.artifact_type === 'FILE');
        expect(await artifactText(t, file)).toBe('hello\n');
        const conv = await conversation(id);
        const calls = conv.filter((m) => m.type === 'action' && m.kind === 'tool_call');
        expect(calls.map((m) => m.input.tool)).toEqual(c.tools);
        const results = conv.filter((m) => m.type === 'action' && m.kind === 'tool_result');
        expect(results.map((r) => r.input.id)).toEqual(calls.map((m) => m.input.id));
        expect(results[1].input.output).toMatch(/Add hello/); // git log's line: the commit happened
        // The model, the base prompt: mapped to the CLI (its requests show them).
        const requests = requestsOf('write-and-commit');
        expect(requests.length).toBe(3);
        expect(requests[0]!.raw).toContain('base-prompt-marker');
        if (c.type === 'codex') expect(requests[0]!.body.model).toBe(c.model);
        else expect(requests[0]!.path).toContain(`/models/${c.model}:`);
        // The usage the stub reported over the turn's three model calls, in the run's own sums:
        // 3900 input (without the cache), 90 output, 200 read from the cache.
        const { body: usage } = await t.call('GET', `/api/v1/agent/runs/${id}`);
        expect(usage.request_usage.total_tokens).toBe(3900 + 90 + 200);
      });

      it('resumes the CLI session for a follow-up: the model receives the earlier turn', async () => {
        let release!: () => void;
        const held = new Promise<void>((r) => (release = r));
        stub.script(
          { after: held, then: { text: 'First answer, resume-marker-1.' } },
          { text: 'Second answer.' },
        );
        const id = await create('resume-test: say something');
        await eventually(() => requestsOf('resume-test').length === 1, 'the first turn at the model', WITHIN);
        const res = await t.call('POST', `/api/v1/agent/runs/${id}/followups`, {
          message: 'follow-up-marker: go on',
        });
        expect(res.status).toBe(200);
        await eventually(
          async () => (await conversation(id)).some((m) => m.text === 'follow-up-marker: go on'),
          'the follow-up delivered to the harness',
          WITHIN,
        );
        release();
        const run = await runIn(t, id, ended, undefined, WITHIN);
        expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
        const second = requestsOf('follow-up-marker').at(-1)!;
        expect(second.raw).toContain('resume-test: say something');
        expect(second.raw).toContain('First answer, resume-marker-1.');
        expect(run.status_message.message).toBe('Second answer.');
      });

      it('an interrupt stops the turn (BLOCKED, no CLI left); a follow-up resumes the session and the run ends SUCCEEDED', async () => {
        stub.script({ hang: true }, { text: 'Picked up again.' });
        const marker = `interrupt-marker-${Date.now()}`;
        const id = await create(`${marker}: start a long task`);
        await eventually(() => requestsOf(marker).length === 1, 'the turn at the model', WITHIN);
        expect((await t.call('POST', `/api/v1/agent/runs/${id}/interrupt`)).status).toBe(202);
        const blocked = await runIn(t, id, ['BLOCKED', ...ended], undefined, WITHIN);
        expect(blocked.state, JSON.stringify(blocked.status_message)).toBe('BLOCKED');
        await eventually(
          () => processesWith(marker).length === 0,
          'no process of the interrupted turn left',
          WITHIN,
        );
        const followup = `${marker}-followup: go on`;
        expect(
          (await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: followup })).status,
        ).toBe(200);
        const run = await runIn(t, id, ended, undefined, WITHIN);
        expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
        expect(run.status_message.message).toBe('Picked up again.');
        // The same session, resumed: the model is sent the interrupted turn's prompt with the follow-up.
        expect(requestsOf(followup).at(-1)!.raw).toContain(`${marker}: start a long task`);
      });

      it('cancel stops the CLI and its process group within seconds', async () => {
        stub.script({ hang: true });
        const marker = `cancel-marker-${Date.now()}`;
        const id = await create(`${marker}: think for a long time`);
        await eventually(() => requestsOf(marker).length === 1, 'the turn at the model', WITHIN);
        expect(processesWith(marker).length).toBeGreaterThan(0);
        expect((await t.call('POST', `/api/v1/agent/runs/${id}/cancel`)).status).toBe(200);
        await eventually(() => processesWith(marker).length === 0, 'no process of the run left', {
          timeoutMs: 5000,
        });
        expect((await runIn(t, id, ended, undefined, WITHIN)).state).toBe('CANCELLED');
      });

      it.each([
        [{ error: 401 as const }, /refused the API key: check the team secret "provider-key"/],
        [{ error: 429 as const }, /rate-limiting this key or its quota is spent \(HTTP 429\)/],
        [
          { drop: true as const },
          new RegExp(`connection to the model provider failed or was cut \\(check ${c.baseUrlVariable}`),
        ],
      ])(
        'a provider failure (%j) ends the run FAILED with what to do, and nothing hangs',
        async (turn, message) => {
          // Codex retries a failed request or a cut stream (5 times): the provider keeps failing.
          stub.script(...Array<Turn>(12).fill(turn));
          const started = Date.now();
          const marker = `failure-marker-${Object.entries(turn)[0]!.join('-')}`;
          const id = await create(`${marker}: answer`);
          const run = await runIn(t, id, ended, undefined, WITHIN);
          expect(run.state).toBe('FAILED');
          expect(run.status_message.message).toMatch(message);
          expect(Date.now() - started).toBeLessThan(40_000);
          // A refused key is not retried (Codex would try five times more): the turn stopped at the first.
          if ('error' in turn && turn.error === 401) expect(requestsOf(marker).length).toBeLessThanOrEqual(2);
        },
      );

      // Gemini CLI retries these for minutes; the adapter stops at the first retry notice of a rate
      // limit (the CLI would pause a minute), at the third of a 5xx.
      it.skipIf(c.type !== 'gemini').each([
        [
          { error: 429 as const, perMinute: true as const },
          /rate-limiting this key.*\(HTTP 429\).*exceeded your current quota/,
        ],
        [{ error: 529 as const }, /failed or is overloaded \(HTTP 5xx\).*503/],
      ])(
        'a provider that keeps answering %j ends the run FAILED within ~30 s, naming its answer',
        async (turn, message) => {
          stub.script(...Array<Turn>(12).fill(turn));
          const started = Date.now();
          const marker = `retry-marker-${turn.error}`;
          const id = await create(`${marker}: answer`);
          const run = await runIn(t, id, ended, undefined, WITHIN);
          expect(run.state).toBe('FAILED');
          expect(run.status_message.message).toMatch(message);
          expect(run.status_message.message).toMatch(/stopped after \d failed attempt/);
          expect(Date.now() - started).toBeLessThan(30_000);
          expect(requestsOf(marker).length).toBeLessThanOrEqual(4);
        },
      );

      it('the key reaches the provider as its auth header only, and nowhere else', async () => {
        stub.script({ text: 'Hello.' });
        const first = await create('key-marker: say hello');
        expect((await runIn(t, first, ended, undefined, WITHIN)).state).toBe('SUCCEEDED');
        const own = requestsOf('key-marker');
        expect(own.length).toBeGreaterThan(0);
        const expected = (key: string) => (c.type === 'codex' ? `Bearer ${key}` : key);
        for (const r of own) {
          expect(c.keyOf(r)).toBe(expected(KEY));
          expect(r.path + r.query.toString()).not.toContain(KEY); // not in the URL (?key=)
          expect(r.raw).not.toContain(KEY);
        }
        // Another run, with another secret, lists its environment: the first key is not in it.
        const listEnv = 'env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"';
        stub.script(
          c.type === 'codex'
            ? { calls: [{ name: 'exec_command', arguments: { cmd: listEnv } }] }
            : { calls: [{ name: 'run_shell_command', args: { command: listEnv } }] },
          { text: 'Listed.' },
        );
        const other = await create('env-marker: list your environment', { auth_secret_name: 'other-key' });
        expect((await runIn(t, other, ended, undefined, WITHIN)).state).toBe('SUCCEEDED');
        for (const r of requestsOf('env-marker')) expect(c.keyOf(r)).toBe(expected(OTHER_KEY));
        const shown = JSON.stringify(await conversation(other));
        expect(shown).toContain(c.baseUrlVariable); // the tool's output is there…
        expect(shown).not.toContain(KEY); // …without the other run's key
        const list = (await t.call('GET', '/api/v1/agent/runs?limit=100')).body;
        expect(JSON.stringify(list)).not.toContain(KEY);
        for (const { run_id: id } of list.runs) {
          expect(JSON.stringify((await t.call('GET', `/api/v1/agent/runs/${id}`)).body)).not.toContain(KEY);
          expect(JSON.stringify(await conversation(id))).not.toContain(KEY);
          expect((await runEvents(id)).join('\n')).not.toContain(KEY);
        }
      });
    },
  );
}

/** Processes whose command line holds `marker` (the CLI gets the prompt as its argument). */
function processesWith(marker: string): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}
