#!/usr/bin/env node
// The built-in `codex` harness: runs OpenAI's Codex CLI (`codex exec --json`) in the run's workspace
// (docs/harnesses.md, "Codex"). Node built-ins only, besides the translator: it runs in the sandbox.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCliAdapter, runSettings, type McpServer } from './cli-adapter.js';
import { CodexStream } from './codex-stream.js';

const workspace = process.cwd();
const settings = runSettings();
// Codex keeps its configuration and sessions here; the workspace is the run's alone.
const codexHome = join(workspace, '.codex');

/** A TOML string (a JSON string literal is a valid TOML basic string). */
const str = (v: string) => JSON.stringify(v);
const table = (o: Record<string, string> = {}) =>
  `{ ${Object.entries(o)
    .map(([k, v]) => `${str(k)} = ${str(String(v))}`)
    .join(', ')} }`;

/**
 * Codex ignores OPENAI_BASE_URL: the provider (the operator's base URL or OpenAI's, the key from
 * OPENAI_API_KEY) is a model provider in config.toml, with the model, reasoning effort, the run's
 * base prompt and its MCP servers.
 */
function configToml(basePrompt: string | undefined): string {
  const lines = ['model_provider = "factoryd"'];
  if (settings.model) lines.push(`model = ${str(settings.model)}`);
  if (settings.reasoningLevel) lines.push(`model_reasoning_effort = ${str(settings.reasoningLevel)}`);
  if (basePrompt) lines.push(`developer_instructions = ${str(basePrompt)}`);
  lines.push(
    '',
    '[model_providers.factoryd]',
    'name = "OpenAI"',
    `base_url = ${str(process.env.OPENAI_BASE_URL || 'https://api.openai.com/v1')}`,
    'env_key = "OPENAI_API_KEY"',
    'wire_api = "responses"',
  );
  for (const [name, server] of Object.entries(settings.mcpServers))
    lines.push('', ...mcpServer(name, server));
  return `${lines.join('\n')}\n`;
}

function mcpServer(name: string, s: McpServer): string[] {
  const head = `[mcp_servers.${str(name)}]`;
  if ('url' in s) return [head, `url = ${str(s.url)}`, `http_headers = ${table(s.headers)}`];
  return [
    head,
    `command = ${str(s.command)}`,
    `args = [${(s.args ?? []).map(str).join(', ')}]`,
    `env = ${table(s.env)}`,
  ];
}

const stream = new CodexStream(settings.model ?? 'codex-default');

runCliAdapter({
  name: 'codex',
  command: process.env.CODEX_COMMAND || 'codex',
  secretVariables: ['OPENAI_API_KEY'],
  env: { CODEX_HOME: codexHome },
  prepare(basePrompt) {
    mkdirSync(codexHome, { recursive: true, mode: 0o700 });
    writeFileSync(join(codexHome, 'config.toml'), configToml(basePrompt), { mode: 0o600 });
  },
  // The sandbox of factoryd (bwrap or a user of its own) confines the agent; Codex's own sandbox
  // cannot nest inside it, and nobody is there to answer an approval prompt (docs/harnesses.md).
  args: (session) => [
    'exec',
    ...(session ? ['resume'] : []),
    '--json',
    '--skip-git-repo-check',
    '--dangerously-bypass-approvals-and-sandbox',
    ...(session ? [session] : []),
    '-',
  ],
  stream: () => stream,
});
