import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TeamRef } from '../src/auth/auth-context.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { runCli } from './support/cli.js';
import { testCli, TEST_HARNESSES_DIR } from './support/harness-clis.js';
import { startAnthropicStub, type AnthropicStub } from './support/model-stubs/anthropic.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// A team's own base URL for a provider (factoryd teams set-base-url): the real Claude Code CLI in the
// service's sandboxed workers, against three Anthropic stubs on loopback — the operator's
// (ANTHROPIC_BASE_URL), one the operator trusts for teams (HARNESS_EGRESS_TRUST), and one nobody
// trusts, standing for an internal address of the service.
const cli = testCli('claude');
const KEY_A = `sk-ant-team-a-${Math.random().toString(36).slice(2)}`;
const KEY_B = `sk-ant-team-b-${Math.random().toString(36).slice(2)}`;
const ended = ['SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED'];

let t: TestService;
let operator: AnthropicStub;
let gateway: AnthropicStub;
let internal: AnthropicStub;
let before: string | undefined;
const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-cli-'));

describe.skipIf(!cli.path)(
  `a team's own provider base URL${cli.skip ? ` (skipped: ${cli.skip})` : ''}`,
  () => {
    let a: { team: TeamRef; key: string };
    let b: { team: TeamRef; key: string };
    const factoryd = (...args: string[]) =>
      runCli(args, {
        env: {
          DATABASE_URL: t.databaseUrl,
          DATA_DIR: dataDir,
          LOG_LEVEL: 'silent',
          ANTHROPIC_BASE_URL: operator.url,
          HARNESS_EGRESS_TRUST: gateway.url,
        },
      });

    beforeAll(async () => {
      [operator, gateway, internal] = await Promise.all([
        startAnthropicStub({ text: 'from the operator' }),
        startAnthropicStub({ text: 'from the gateway' }),
        startAnthropicStub({ text: 'from inside' }),
      ]);
      before = process.env.ANTHROPIC_BASE_URL;
      process.env.ANTHROPIC_BASE_URL = operator.url;
      process.env.HARNESSES_DIR = TEST_HARNESSES_DIR;
      t = await startTestService({
        ANTHROPIC_BASE_URL: operator.url,
        HARNESS_EGRESS_TRUST: gateway.url,
        WORKER_CONCURRENCY: '2',
        FACTORY_POLL_SECONDS: '3600',
      });
      a = await t.newTeam('team-a');
      b = await t.newTeam('team-b');
      const secrets = t.service.app.get(SecretsService);
      await secrets.set(a.team.id, 'anthropic-key', KEY_A);
      await secrets.set(b.team.id, 'anthropic-key', KEY_B);
    });
    afterAll(async () => {
      await t?.stop();
      await Promise.all([operator?.close(), gateway?.close(), internal?.close()]);
      if (before === undefined) delete process.env.ANTHROPIC_BASE_URL;
      else process.env.ANTHROPIC_BASE_URL = before;
      rmSync(dataDir, { recursive: true, force: true });
    });

    const run = async (key: string, prompt: string) => {
      const res = await t.call(
        'POST',
        '/api/v1/agent/runs',
        { prompt, config: { harness: { type: 'claude', auth_secret_name: 'anthropic-key' } } },
        key,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return runIn(t, res.body.run_id, ended, key, { timeoutMs: 60_000 });
    };
    const asked = (stub: AnthropicStub, marker: string) =>
      stub.modelRequests().filter((r) => JSON.stringify(r.body.messages).includes(marker));

    it.skipIf(twoTeamsRefused)(
      `team A's override reaches A's Claude Code runs; team B keeps the operator's${twoTeamsNote}`,
      async () => {
        const set = await factoryd(
          'teams',
          'set-base-url',
          'team-a',
          '--provider',
          'anthropic',
          `${gateway.url}/`,
        );
        expect(set.code, set.stderr).toBe(0);
        expect(set.stdout).toContain(`Team team-a's anthropic harnesses use: ${gateway.url}`);
        const listed = JSON.parse((await factoryd('teams', 'list', '--json')).stdout).teams;
        expect(listed.find((x: any) => x.name === 'team-a').base_urls).toEqual({ anthropic: gateway.url });
        expect(listed.find((x: any) => x.name === 'team-b').base_urls).toEqual({});

        const [ranA, ranB] = await Promise.all([
          run(a.key, 'marker-team-a: say hello'),
          run(b.key, 'marker-team-b: say hello'),
        ]);
        expect(ranA.state, JSON.stringify(ranA.status_message)).toBe('SUCCEEDED');
        expect(ranA.status_message.message).toBe('from the gateway');
        expect(ranB.state, JSON.stringify(ranB.status_message)).toBe('SUCCEEDED');
        expect(ranB.status_message.message).toBe('from the operator');
        // Each team's requests, with its own key, at its own base URL only.
        expect(asked(gateway, 'marker-team-a').length).toBeGreaterThan(0);
        for (const r of asked(gateway, 'marker-team-a')) expect(r.headers['x-api-key']).toBe(KEY_A);
        expect(asked(operator, 'marker-team-b').length).toBeGreaterThan(0);
        expect(asked(operator, 'marker-team-a')).toEqual([]);
        expect(asked(gateway, 'marker-team-b')).toEqual([]);
        for (const r of operator.requests) expect(JSON.stringify(r.headers)).not.toContain(KEY_A);
        for (const r of gateway.requests) expect(JSON.stringify(r.headers)).not.toContain(KEY_B);

        // --default goes back to the operator's.
        const reset = await factoryd(
          'teams',
          'set-base-url',
          'team-a',
          '--provider',
          'anthropic',
          '--default',
        );
        expect(reset.code, reset.stderr).toBe(0);
        const again = await run(a.key, 'marker-team-a-again: say hello');
        expect(again.status_message.message).toBe('from the operator');
        expect(asked(gateway, 'marker-team-a-again')).toEqual([]);
      },
    );

    it.each([
      [
        ['--provider', 'anthropic', 'INTERNAL'],
        /loopback, private or link-local address \(127\.0\.0\.1:\d+\).*HARNESS_EGRESS_TRUST/,
      ],
      [
        ['--provider', 'anthropic', 'http://localhost:5432'],
        /loopback, private or link-local address \(localhost:5432\)/,
      ],
      [
        ['--provider', 'anthropic', 'https://user:hunter2@gateway.example.com'],
        /must not carry a user name or password/,
      ],
      [
        ['--provider', 'mistral', 'https://gateway.example.com'],
        /--provider must be one of anthropic, openai, gemini/,
      ],
      // The rest of the URL checks: src/harnesses/base-url.spec.ts.
    ])('refuses set-base-url %j with a message, changing nothing', async (args, message) => {
      const res = await factoryd(
        'teams',
        'set-base-url',
        'team-b',
        ...args.map((x) => (x === 'INTERNAL' ? internal.url : x)),
      );
      expect(res.code).not.toBe(0);
      expect(res.stderr).toMatch(message);
      expect(res.stderr).not.toContain('hunter2');
      const listed = JSON.parse((await factoryd('teams', 'list', '--json')).stdout).teams;
      expect(listed.find((x: any) => x.name === 'team-b').base_urls).toEqual({});
    });

    it.skipIf(twoTeamsRefused)(
      `a stored override to an address the operator no longer trusts fails the run at once; the CLI never reaches it${twoTeamsNote}`,
      async () => {
        // As if set while HARNESS_EGRESS_TRUST named it, and the operator since took it out.
        await t.service.db.execute(`UPDATE teams SET harness_base_urls = $2 WHERE id = $1`, [
          b.team.id,
          JSON.stringify({ anthropic: internal.url }),
        ]);
        const ran = await run(b.key, 'marker-internal: say hello');
        expect(ran.state).toBe('FAILED');
        expect(ran.status_message.message).toMatch(
          /team's base URL for Claude Code \(teams set-base-url --provider anthropic\): .*loopback, private or link-local address \(127\.0\.0\.1:\d+\)/,
        );
        expect(internal.requests).toEqual([]);
        expect(asked(operator, 'marker-internal')).toEqual([]);
      },
    );
  },
);
