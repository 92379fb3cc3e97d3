import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { deliver } from './support/definitions.js';
import { automation, baseFactory, TestRepo } from './support/git-repo.js';
import { artifactText } from './support/artifacts.js';
import { eventually } from './support/eventually.js';
import { testCli, TEST_HARNESSES_DIR } from './support/harness-clis.js';
import { startAnthropicStub, workingDirectory, type AnthropicStub } from './support/model-stubs/anthropic.js';
import { runIn, startTestService, type TestService } from './support/service.js';

// The real Claude Code CLI (installed from npm into the tests' cache), run by the built-in harness
// in the real service's workers, against the Anthropic Messages API stub on loopback.
const cli = testCli('claude');
const KEY = `sk-ant-test-${Math.random().toString(36).slice(2)}-secret`;
const OTHER_KEY = `sk-ant-other-${Math.random().toString(36).slice(2)}`;

let t: TestService;
let stub: AnthropicStub;
let repo: TestRepo | undefined;
const ended = ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'];

describe.skipIf(!cli.path)(
  `Claude Code as a built-in harness${cli.skip ? ` (skipped: ${cli.skip})` : ''}`,
  () => {
    beforeAll(async () => {
      stub = await startAnthropicStub();
      // The operator's base URL, passed to Claude Code harnesses only; the CLI from the tests' cache.
      process.env.ANTHROPIC_BASE_URL = stub.url;
      process.env.HARNESSES_DIR = TEST_HARNESSES_DIR;
      t = await startTestService(
        {
          // Also the service's own setting: its egress proxy lets sandboxed harnesses reach only the
          // providers' base URLs the operator set (docs/security.md, "A harness's network").
          ANTHROPIC_BASE_URL: stub.url,
          WORKER_CONCURRENCY: '2',
          HARNESS_KILL_GRACE_MS: '1000',
          FACTORY_POLL_SECONDS: '3600',
          // Everything the service logs, at its most detailed, is read for the keys (the last test).
          LOG_LEVEL: 'debug',
        },
        { captureLog: true },
      );
      const secrets = t.service.app.get(SecretsService);
      await secrets.set(t.defaultTeam.id, 'anthropic-key', KEY);
      await secrets.set(t.defaultTeam.id, 'other-key', OTHER_KEY);
    });
    afterAll(async () => {
      await t?.stop();
      await stub?.close();
      repo?.remove();
    });

    const create = async (prompt: string, harness: Record<string, unknown> = {}) => {
      const res = await t.call('POST', '/api/v1/agent/runs', {
        prompt,
        config: { harness: { type: 'claude', auth_secret_name: 'anthropic-key', ...harness } },
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
    const requestsOf = (marker: string) =>
      stub.modelRequests().filter((r) => JSON.stringify(r.body.messages).includes(marker));

    it('runs a turn with tools: the file it wrote is an artifact, calls and results in the conversation, usage reported', async () => {
      stub.script(
        (body) => ({
          tool: {
            name: 'Write',
            input: { file_path: join(workingDirectory(body), 'hello.txt'), content: 'hello\n' },
          },
          usage: { input_tokens: 1200, output_tokens: 40 },
        }),
        {
          tool: {
            name: 'Bash',
            input: {
              command:
                'git init -q && git add hello.txt && git -c user.email=a@example.com -c user.name=agent commit -qm "Add hello" && git log --oneline',
            },
          },
          usage: { input_tokens: 1300, output_tokens: 30 },
        },
        { text: 'Wrote and committed hello.txt.', usage: { input_tokens: 1400, output_tokens: 20 } },
      );
      const id = await create('write-and-commit: add hello.txt and commit it');
      const run = await runIn(t, id, ended);
      expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      expect(run.status_message.message).toBe('Wrote and committed hello.txt.');
      const file = run.artifacts.find((a: any) => a.artifact_type === 'FILE');
      expect(file.data.filename).toBe('hello.txt');
      expect(await artifactText(t, file)).toBe('hello\n');
      const conv = await conversation(id);
      const calls = conv.filter((m) => m.type === 'action' && m.kind === 'tool_call');
      expect(calls.map((c) => c.input.tool)).toEqual(['Write', 'Bash']);
      const results = conv.filter((m) => m.type === 'action' && m.kind === 'tool_result');
      expect(results).toHaveLength(2);
      expect(results[1].input.id).toBe(calls[1].input.id);
      expect(results[1].input.output).toMatch(/Add hello/); // git log's line: the commit happened
      expect(conv.at(-2)).toMatchObject({
        type: 'message',
        role: 'assistant',
        text: 'Wrote and committed hello.txt.',
      });
      // The usage the stub reported, summed over the turn's three model calls, per model, in the
      // run's own usage (not its conversation), and in Claude Code's categories.
      expect(run.request_usage.total_tokens).toBe(3990);
      const { body: detail } = await t.call('GET', `/api/v1/agent/runs/${id}/harness-usage`);
      const counts = JSON.stringify(detail);
      expect(counts).toMatch(/"input_tokens":3900\b/);
      expect(counts).toMatch(/"output_tokens":90\b/);
      // The raw stream is the run's transcript.
      expect(
        (await runEvents(id)).some(
          (b) => b.includes('stream-json') || b.includes('\\"subtype\\":\\"init\\"'),
        ),
      ).toBe(true);
    });

    it('a branch the agent pushed is an artifact of the run (EXTERNAL_REFERENCE git_branch)', async () => {
      // A real remote the sandbox can reach: a bare repository in the workspace, pushed to over file://.
      const push = [
        'git init -q work && cd work',
        'git -c user.email=a@example.com -c user.name=agent commit -q --allow-empty -m "Start"',
        'git init -q --bare ../remote.git',
        'git remote add origin "file://$(cd .. && pwd)/remote.git"',
        'git push -q origin HEAD:refs/heads/agent/feature-1',
        'git ls-remote origin',
      ].join(' && ');
      stub.script(
        { tool: { name: 'Bash', input: { command: push } }, usage: { input_tokens: 100, output_tokens: 10 } },
        { text: 'Pushed agent/feature-1.', usage: { input_tokens: 100, output_tokens: 10 } },
      );
      const id = await create('push-branch: commit and push a branch');
      const run = await runIn(t, id, ended);
      expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      const conv = await conversation(id);
      const result = conv.find((m) => m.type === 'action' && m.kind === 'tool_result');
      expect(result.input.output).toMatch(/refs\/heads\/agent\/feature-1/); // the push happened
      const branches = (run.artifacts ?? []).filter((a: any) => a.artifact_type === 'EXTERNAL_REFERENCE');
      expect(branches).toHaveLength(1);
      expect(branches[0].data).toMatchObject({
        reference_type: 'git_branch',
        title: 'agent/feature-1',
        url: expect.stringMatching(/^file:\/\/\/.*\/remote\.git#agent\/feature-1$/),
        metadata: { branch: 'agent/feature-1', remote: 'origin', repository: 'work' },
      });
      expect(branches[0].data.metadata.commit).toMatch(/^[0-9a-f]{40}$/);
      // The list's filter finds the run by it.
      const { body } = await t.call('GET', '/api/v1/agent/runs?artifact_type=EXTERNAL_REFERENCE');
      expect(body.runs.map((r: any) => r.run_id)).toContain(id);
    });

    it('resumes the CLI session for a follow-up: the model receives the earlier turn', async () => {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      stub.script(
        { after: held, then: { text: 'First answer, resume-marker-1.' } },
        { text: 'Second answer.' },
      );
      const id = await create('resume-test: say something');
      await eventually(() => requestsOf('resume-test').length === 1, 'the first turn at the model');
      const res = await t.call('POST', `/api/v1/agent/runs/${id}/followups`, {
        message: 'follow-up-marker: go on',
      });
      expect(res.status).toBe(200);
      await eventually(
        async () => (await conversation(id)).some((m) => m.text === 'follow-up-marker: go on'),
        'the follow-up delivered to the harness',
      );
      release();
      const run = await runIn(t, id, ended);
      expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      const second = requestsOf('follow-up-marker').at(-1)!;
      const seen = JSON.stringify(second.body.messages);
      expect(seen).toContain('resume-test: say something');
      expect(seen).toContain('First answer, resume-marker-1.');
      expect(run.status_message.message).toBe('Second answer.');
    });

    it('cancel stops the CLI and its process group within seconds', async () => {
      stub.script({ after: new Promise(() => undefined), then: { text: 'never' } });
      const marker = `cancel-marker-${Date.now()}`;
      const id = await create(`${marker}: think for a long time`);
      await eventually(() => requestsOf(marker).length === 1, 'the turn at the model');
      expect(processesWith(marker).length).toBeGreaterThan(0);
      const res = await t.call('POST', `/api/v1/agent/runs/${id}/cancel`);
      expect(res.status).toBe(200);
      await eventually(() => processesWith(marker).length === 0, 'no process of the run left', {
        timeoutMs: 5000,
      });
      expect((await runIn(t, id, ended)).state).toBe('CANCELLED');
    });

    it('an interrupt stops the turn (BLOCKED, no CLI left); a follow-up resumes the session and the run ends SUCCEEDED', async () => {
      stub.script(
        { after: new Promise(() => undefined), then: { text: 'never' } },
        { text: 'Picked up again.' },
      );
      const marker = `interrupt-marker-${Date.now()}`;
      const id = await create(`${marker}: start a long task`);
      await eventually(() => requestsOf(marker).length === 1, 'the turn at the model');
      const res = await t.call('POST', `/api/v1/agent/runs/${id}/interrupt`);
      expect(res.status).toBe(202);
      const blocked = await runIn(t, id, ['BLOCKED', ...ended]);
      expect(blocked.state, JSON.stringify(blocked.status_message)).toBe('BLOCKED');
      await eventually(() => processesWith(marker).length === 0, 'no process of the interrupted turn left');
      const followup = `${marker}-followup: go on`;
      expect((await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: followup })).status).toBe(
        200,
      );
      const run = await runIn(t, id, ended);
      expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      expect(run.status_message.message).toBe('Picked up again.');
      // The same session, resumed: the model is sent the interrupted turn's prompt with the follow-up.
      const seen = JSON.stringify(requestsOf(followup).at(-1)!.body.messages);
      expect(seen).toContain(`${marker}: start a long task`);
    });

    it.each([
      [
        { status: 401, errorType: 'authentication_error', message: 'invalid x-api-key' },
        /refused the API key \(HTTP 401\).*"anthropic-key"/,
      ],
      [
        { status: 429, errorType: 'rate_limit_error', message: 'rate limited' },
        /rate-limiting this key \(HTTP 429\)/,
      ],
      [{ status: 529, errorType: 'overloaded_error', message: 'Overloaded' }, /overloaded \(HTTP 529\)/],
      [{ drop: true as const }, /connection to the model provider failed or was cut/],
    ])('a provider failure (%j) ends the run FAILED with what to do, fast', async (reply, message) => {
      stub.script(reply, reply, reply, reply);
      const started = Date.now();
      const id = await create(`failure-${JSON.stringify(reply)}`);
      const run = await runIn(t, id, ended);
      expect(run.state).toBe('FAILED');
      expect(run.status_message.message).toMatch(message);
      expect(Date.now() - started).toBeLessThan(20_000);
    });

    it('a missing secret ends the run at once, naming the secret', async () => {
      const id = await create('missing secret', { auth_secret_name: 'no-such-secret' });
      const run = await runIn(t, id, ended);
      expect(run.state).toBe('FAILED');
      expect(run.status_message.message).toMatch(/team secret "no-such-secret".*does not exist/);
    });

    it("a team's agent with auth.workerEnvironment never gets the operator's key on a service-hosted worker", async () => {
      // The operator set a key for the service (a gateway's, say); a team's factory agent asks for
      // "the worker's own environment" on a service-hosted worker, which is the operator's.
      const operatorKey = `sk-ant-operator-${Math.random().toString(36).slice(2)}`;
      const before = process.env.ANTHROPIC_API_KEY;
      process.env.ANTHROPIC_API_KEY = operatorKey;
      const envRepo = new TestRepo();
      try {
        await t.service.app.get(ReconcileScheduler).firstPoll;
        await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'hook-token');
        const f = await t.service.app.get(DefinitionStore).register({
          teamId: t.defaultTeam.id,
          name: 'worker-env-factory',
          repoUrl: envRepo.dir,
          branch: 'main',
        });
        envRepo.commit({
          ...baseFactory(),
          'agents/lead/agent.md':
            '---\nagentType: FOREMAN\ndescription: Leads\noverrides:\n  harness: claude\n  auth:\n    workerEnvironment: true\n---\nYou lead.\n',
        });
        expect((await t.service.app.get(Reconciler).request(f!.id)).errors).toEqual([]);
        // Should the CLI start, the model answers and the run succeeds: only the refusal fails it.
        stub.script({ text: 'Took the key.' });
        const res = await t.call('POST', `/api/v1/factory/${f!.uid}/runs`, {
          prompt: 'worker-env-marker: say hello',
        });
        expect(res.status).toBe(200);
        const run = await runIn(t, res.body.run_id, ended);
        expect(run.agent_config.harness).toMatchObject({ type: 'claude', worker_environment: true });
        expect(run.state).toBe('FAILED');
        expect(run.status_message.message).toMatch(
          /auth\.workerEnvironment .*honoured only on the team's own self-hosted worker/,
        );
        expect(JSON.stringify(run)).not.toContain(operatorKey);
        expect(requestsOf('worker-env-marker')).toEqual([]);
        for (const r of stub.requests) expect(JSON.stringify(r.headers)).not.toContain(operatorKey);
      } finally {
        if (before === undefined) delete process.env.ANTHROPIC_API_KEY;
        else process.env.ANTHROPIC_API_KEY = before;
        envRepo.remove();
      }
    });

    it('a webhook delivery whose automation runs a Claude Code agent ends SUCCEEDED, answering the payload', async () => {
      await t.service.app.get(ReconcileScheduler).firstPoll;
      await t.service.app.get(SecretsService).set(t.defaultTeam.id, 'hook-secret', 'hook-token');
      repo = new TestRepo();
      const f = await t.service.app
        .get(DefinitionStore)
        .register({ teamId: t.defaultTeam.id, name: 'claude-factory', repoUrl: repo.dir, branch: 'main' });
      const reconciler = t.service.app.get(Reconciler);
      repo.commit({
        ...baseFactory(),
        'agents/fixer/agent.md':
          '---\ndescription: Fixes bugs\noverrides:\n  harness: claude\n  auth:\n    managedSecret: anthropic-key\n---\nYou fix bugs.\n',
      });
      expect((await reconciler.request(f!.id)).errors).toEqual([]);
      const hook = (await t.call('GET', `/api/v1/factory/${f!.uid}/webhooks`)).body.webhooks[0].uid as string;
      repo.commit({ 'automations/fix/automation.md': automation(hook) });
      expect((await reconciler.request(f!.id)).errors).toEqual([]);
      // The model reads the payload the run came with, then answers from what it read.
      stub.script(
        (body) => ({
          tool: { name: 'Read', input: { file_path: join(workingDirectory(body), 'event-payload.json') } },
        }),
        (body) => {
          const read = JSON.stringify(body.messages.at(-1));
          const title = /crash-on-start-\d+/.exec(read)?.[0] ?? 'nothing';
          return { text: `Triaged issue ${title}.` };
        },
      );
      const title = `crash-on-start-${Date.now()}`;
      const sent = await deliver(
        t.url,
        `/webhooks/w/${hook}`,
        JSON.stringify({ action: 'opened', issue: { title } }),
        {
          authorization: 'Bearer hook-token',
        },
      );
      expect(sent.status).toBe(202);
      const runId = await eventually(async () => {
        const runs = (await t.call('GET', '/api/v1/agent/runs?source=WEBHOOK')).body.runs;
        return runs[0]?.run_id as string | undefined;
      }, 'the run of the delivery');
      const run = await runIn(t, runId, ended);
      expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
      expect(run.agent_config.harness).toMatchObject({ type: 'claude', auth_secret_name: 'anthropic-key' });
      expect(run.status_message.message).toBe(`Triaged issue ${title}.`);
      const conv = await conversation(runId);
      expect(conv.find((m) => m.kind === 'tool_call')?.input.tool).toBe('Read');
      expect(conv.some((m) => m.role === 'assistant' && m.text === `Triaged issue ${title}.`)).toBe(true);
    });

    it('the key reaches the provider as x-api-key and nowhere else', async () => {
      const own = requestsOf('write-and-commit');
      expect(own.length).toBeGreaterThan(0);
      for (const r of own) expect(r.headers['x-api-key']).toBe(KEY);
      // Another run, with another secret, prints its environment: the first key is not in it.
      stub.script(
        {
          tool: { name: 'Bash', input: { command: 'env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"' } },
        },
        { text: 'Listed.' },
      );
      const other = await create('env-marker: list your environment', { auth_secret_name: 'other-key' });
      expect((await runIn(t, other, ended)).state).toBe('SUCCEEDED');
      for (const r of requestsOf('env-marker')) expect(r.headers['x-api-key']).toBe(OTHER_KEY);
      const shown = JSON.stringify(await conversation(other));
      expect(shown).toContain('ANTHROPIC_BASE_URL'); // the tool's output is there…
      expect(shown).not.toContain(KEY); // …without the other run's key
      // Not in any run's detail, conversation or transcript, nor in the runs list.
      const ids = (await t.call('GET', '/api/v1/agent/runs?limit=100')).body.runs.map((r: any) => r.run_id);
      expect(JSON.stringify((await t.call('GET', '/api/v1/agent/runs?limit=100')).body)).not.toContain(KEY);
      for (const id of ids) {
        expect(JSON.stringify((await t.call('GET', `/api/v1/agent/runs/${id}`)).body)).not.toContain(KEY);
        expect(JSON.stringify(await conversation(id))).not.toContain(KEY);
        expect((await runEvents(id)).join('\n')).not.toContain(KEY);
      }
      // Nor in the service's log at debug, over every run of this file: the log is there (its
      // request lines name these runs), the keys are not.
      const log = t.loggedText();
      expect(log).toContain(`/api/v1/agent/runs/${other}`);
      expect(log).toMatch(/"level":20\b/);
      for (const key of [KEY, OTHER_KEY]) expect(log).not.toContain(key);
    });
  },
);

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
