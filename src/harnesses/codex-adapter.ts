/**
 * Codex as a built-in harness (docs/harnesses.md, "Codex"): `codex exec --json` per turn, `codex exec
 * resume <session>` for the next, in the run's workspace, inside the harness sandbox. The program
 * itself is codex.harness.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CliAdapter, HarnessSettings } from './adapter-runner.js';
import { CodexStream } from './codex-stream.js';

/** `reasoning_level` values Codex's `model_reasoning_effort` takes; others are not passed (and said so). */
const EFFORTS = new Set(['minimal', 'low', 'medium', 'high', 'xhigh']);

export function codexAdapter(settings: HarnessSettings): CliAdapter {
  // Codex keeps its configuration, sessions and logs in CODEX_HOME: the run's own, in its workspace.
  const home = join(settings.workspace, '.codex');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const harness = (settings.config.harness ?? {}) as Record<string, unknown>;
  const effort = typeof harness.reasoning_level === 'string' ? harness.reasoning_level.toLowerCase() : '';
  const notices: string[] = [];
  if (effort && !EFFORTS.has(effort))
    notices.push(
      `reasoning_level "${effort}" is not one Codex takes (${[...EFFORTS].join(', ')}): not passed`,
    );
  const mcp = mcpServers(settings.config.mcp_servers, notices);
  const stream = new CodexStream({ modelId: settings.modelId, secretName: settings.secretName });
  let configured = false;
  return {
    title: 'Codex',
    notices,
    env: { CODEX_HOME: home },
    args: (turn) => {
      if (!configured) {
        writeFileSync(
          join(home, 'config.toml'),
          configToml({
            model: settings.modelId,
            effort: EFFORTS.has(effort) ? effort : undefined,
            basePrompt: turn.basePrompt,
            mcp,
          }),
          { mode: 0o600 },
        );
        configured = true;
      }
      return [
        'exec',
        ...(turn.session ? ['resume'] : []),
        '--json',
        '--skip-git-repo-check',
        // Nobody can answer an approval prompt headless, and Codex's own sandbox (namespaces, seccomp)
        // cannot nest inside factoryd's: factoryd's sandbox is the boundary (docs/harnesses.md).
        '--dangerously-bypass-approvals-and-sandbox',
        '--',
        ...(turn.session ? [turn.session] : []),
        turn.text,
      ];
    },
    translate: (line) => stream.translate(line),
  };
}

/** A TOML string (a JSON string literal is a valid TOML basic string). */
const str = (v: string) => JSON.stringify(v);
const inlineTable = (o: Record<string, unknown> = {}) =>
  `{ ${Object.entries(o)
    .map(([k, v]) => `${str(k)} = ${str(String(v))}`)
    .join(', ')} }`;

interface CodexConfig {
  model?: string;
  effort?: string;
  basePrompt?: string;
  mcp: string[];
}

/**
 * Codex ignores OPENAI_BASE_URL: the provider is a model provider of config.toml with the base URL
 * (the operator's, else OpenAI's) and the key's variable, and with it the model, the reasoning
 * effort, the run's base prompt (developer instructions) and its MCP servers. The file is the run's
 * (mode 0600); no credential goes on a command line.
 */
function configToml(c: CodexConfig): string {
  const lines = ['model_provider = "factoryd"'];
  if (c.model) lines.push(`model = ${str(c.model)}`);
  if (c.effort) lines.push(`model_reasoning_effort = ${str(c.effort)}`);
  if (c.basePrompt) lines.push(`developer_instructions = ${str(c.basePrompt)}`);
  lines.push(
    '',
    '[model_providers.factoryd]',
    'name = "OpenAI"',
    `base_url = ${str(process.env.OPENAI_BASE_URL || 'https://api.openai.com/v1')}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
    ...c.mcp,
  );
  return `${lines.join('\n')}\n`;
}

/** The run's MCP servers as config.toml tables; a `warp_id` server has nothing to start here. */
function mcpServers(servers: unknown, notices: string[]): string[] {
  if (!servers || typeof servers !== 'object') return [];
  return Object.entries(servers as Record<string, any>).flatMap(([name, s]) => {
    const head = ['', `[mcp_servers.${str(name)}]`];
    if (typeof s?.command === 'string')
      return [
        ...head,
        `command = ${str(s.command)}`,
        `args = [${(Array.isArray(s.args) ? s.args : []).map((a: unknown) => str(String(a))).join(', ')}]`,
        `env = ${inlineTable(s.env)}`,
      ];
    if (typeof s?.url === 'string')
      return [...head, `url = ${str(s.url)}`, `http_headers = ${inlineTable(s.headers)}`];
    notices.push(`MCP server "${name}" names no command or URL (warp_id): Codex cannot start it`);
    return [];
  });
}
