import { createHash, randomBytes } from 'node:crypto';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFIG, type Config } from '../../src/config/config.js';
import { SealMcpCredentials1763684400000 } from '../../src/database/migrations/1763684400000-seal-mcp-credentials.js';
import { McpCredentials } from '../../src/secrets/mcp-credentials.js';
import { runCli } from '../support/cli.js';
import { eventually } from '../support/eventually.js';
import { startTestService, type TestService } from '../support/service.js';

const sha256 = (s: string) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

/**
 * A harness that reports what it was handed: FACTORYD_AGENT_CONFIG, each MCP credential replaced by
 * its SHA-256 (so the test can tell the real value arrived, without the value reaching the
 * conversation), as a `probe` action; then it succeeds.
 */

/**
 * Issue #13, 8: MCP server headers (a bearer token) were stored in plain text and shown to every
 * runs:read key of the team. Now sealed at rest, "[redacted]" in every read, and opened only for
 * the harness that runs the run.
 */
describe('MCP server credentials (docs/security.md, "MCP server credentials")', () => {
  let t: TestService;
  let readerKey: string;
  const token = `ghp_${randomBytes(18).toString('hex')}`;
  const envToken = `lin_${randomBytes(18).toString('hex')}`;
  const config = {
    mcp_servers: {
      github: { url: 'https://api.githubcopilot.com/mcp/', headers: { Authorization: `Bearer ${token}` } },
      linear: { command: 'linear-mcp', args: ['--stdio'], env: { LINEAR_API_KEY: envToken } },
    },
  };

  beforeAll(async () => {
    t = await startTestService({
      SECRETS_KEY: randomBytes(32).toString('base64'),
      WORKER_CONCURRENCY: '1',
      HARNESS_COMMAND: packageProgramCommand('test/security', 'mcp-probe-harness.mjs'),
    });
    readerKey = await t.newKey([t.defaultTeam], ['runs:read']);
  });
  afterAll(async () => {
    await t?.stop();
  });

  let runId: string;

  it('the database row holds no plaintext credential', async () => {
    const res = await t.call('POST', '/api/v1/agent/runs', { prompt: 'use the MCP servers', config });
    expect(res.status).toBe(200);
    runId = res.body.run_id;
    const [row] = await t.service.db.query<{ text: string }>(
      `SELECT row_to_json(r)::text AS text FROM runs r WHERE id = $1`,
      [runId],
    );
    expect(row!.text).not.toContain(token);
    expect(row!.text).not.toContain(envToken);
    // Everything else of the config is stored as given.
    expect(row!.text).toContain('https://api.githubcopilot.com/mcp/');
    expect(row!.text).toContain('linear-mcp');
  });

  it('GET run, the run list and the CLI show "[redacted]", keeping the header and variable names', async () => {
    const redacted = {
      github: { url: 'https://api.githubcopilot.com/mcp/', headers: { Authorization: '[redacted]' } },
      linear: { command: 'linear-mcp', args: ['--stdio'], env: { LINEAR_API_KEY: '[redacted]' } },
    };
    const one = await t.call('GET', `/api/v1/agent/runs/${runId}`, undefined, readerKey);
    expect(one.status).toBe(200);
    expect(one.body.agent_config.mcp_servers).toEqual(redacted);
    const list = await t.call('GET', '/api/v1/agent/runs?limit=5', undefined, readerKey);
    expect(
      list.body.runs.find((r: { run_id: string }) => r.run_id === runId).agent_config.mcp_servers,
    ).toEqual(redacted);
    const cli = await runCli(['runs', 'show', runId, '--json'], {
      env: { FACTORYD_API_URL: t.url, FACTORYD_API_KEY: readerKey },
    });
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout).agent_config.mcp_servers).toEqual(redacted);
    for (const text of [JSON.stringify(one.body), JSON.stringify(list.body), cli.stdout]) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(envToken);
    }
  });

  it('the harness that runs it gets the real values in FACTORYD_AGENT_CONFIG; the conversation shows none', async () => {
    const run = await eventually(async () => {
      const res = await t.call('GET', `/api/v1/agent/runs/${runId}`);
      return ['SUCCEEDED', 'FAILED', 'ERROR'].includes(res.body.state) && res.body;
    }, 'the probe run to end');
    expect(run.state, JSON.stringify(run.status_message)).toBe('SUCCEEDED');
    const conversation = (
      await t.call('GET', `/api/v1/agent/runs/${runId}/conversation`, undefined, readerKey)
    ).body;
    const probe = conversation.messages.find((m: { kind?: string }) => m.kind === 'probe');
    expect(probe.input.config.mcp_servers).toEqual({
      github: {
        url: 'https://api.githubcopilot.com/mcp/',
        headers: { Authorization: sha256(`Bearer ${token}`) },
      },
      linear: { command: 'linear-mcp', args: ['--stdio'], env: { LINEAR_API_KEY: sha256(envToken) } },
    });
    expect(JSON.stringify(conversation)).not.toContain(token);
  });

  it('the migration seals credentials a run stored in plain text before', async () => {
    const [{ id }] = await t.service.db.query<{ id: string }>(
      `INSERT INTO runs (id, team_id, title, prompt, search_text, state, source, conversation_id, created_at, updated_at, agent_config)
       VALUES (gen_random_uuid(), $1, 'old', 'old', 'old', 'SUCCEEDED', 'API', gen_random_uuid(), now(), now(), $2)
       RETURNING id`,
      [t.defaultTeam.id, config],
    );
    const saved = process.env.SECRETS_KEY;
    // The migration reads the key from the environment, as `factoryd serve` does.
    process.env.SECRETS_KEY = t.service.app.get<Config>(CONFIG).secretsKey!.toString('base64');
    const runner = t.service.db.dataSource.createQueryRunner();
    try {
      await new SealMcpCredentials1763684400000().up(runner);
    } finally {
      await runner.release();
      process.env.SECRETS_KEY = saved;
    }
    const [row] = await t.service.db.query<{ agent_config: typeof config; text: string }>(
      `SELECT agent_config, agent_config::text AS text FROM runs WHERE id = $1`,
      [id],
    );
    expect(row!.text).not.toContain(token);
    expect(row!.text).not.toContain(envToken);
    expect(t.service.app.get(McpCredentials).open(row!.agent_config, id)).toEqual(config);
  });
});
