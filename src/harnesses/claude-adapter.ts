/**
 * Claude Code as a built-in harness (docs/harnesses.md): `claude -p … --output-format stream-json
 * --verbose` per turn, `--resume <session>` for the next, in the run's workspace, inside the harness
 * sandbox. The program itself is claude.harness.ts.
 */
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CliAdapter, HarnessSettings } from './adapter-runner.js';
import { translateClaude } from './claude-stream.js';

/**
 * `reasoning_level` values Claude Code's `--effort` takes (2.1's `claude --help`: low, medium, high,
 * xhigh, max); others are not passed (and said so).
 */
const EFFORTS = new Set(['low', 'medium', 'high', 'xhigh', 'max']);

export function claudeAdapter(settings: HarnessSettings): CliAdapter {
  const dir = join(settings.workspace, '.factoryd');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const harness = (settings.config.harness ?? {}) as Record<string, unknown>;
  const effort = typeof harness.reasoning_level === 'string' ? harness.reasoning_level.toLowerCase() : '';
  const notices: string[] = [];
  if (effort && !EFFORTS.has(effort))
    notices.push(
      `reasoning_level "${effort}" is not one Claude Code takes (${[...EFFORTS].join(', ')}): not passed`,
    );
  const mcp = mcpConfig(settings.config.mcp_servers, dir, notices);
  linkSkills(settings.workspace);
  let basePromptFile: string | undefined;
  return {
    title: 'Claude Code',
    notices,
    env: {
      // No update checks, telemetry or error reports from inside a run: only the model's API.
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      // The CLI retries a failing provider up to 10 times with growing pauses (minutes): two, then the
      // run ends with the provider's answer (a refused key is not retried at all: claude-stream.ts).
      CLAUDE_CODE_MAX_RETRIES: process.env.CLAUDE_CODE_MAX_RETRIES ?? '2',
      // bypassPermissions is refused to root outside a sandbox; factoryd's sandbox is one (see below).
      IS_SANDBOX: '1',
    },
    args: (turn) => {
      if (turn.basePrompt && !basePromptFile) {
        basePromptFile = join(dir, 'base-prompt.md');
        writeFileSync(basePromptFile, turn.basePrompt, { mode: 0o600 });
      }
      return [
        '-p',
        turn.text,
        '--output-format',
        'stream-json',
        '--verbose',
        // Nobody can answer a permission prompt headless. The harness sandbox is the boundary: only the
        // workspace is writable, the service's folders are not there, the process runs as an
        // unprivileged uid (docs/harnesses.md, "Permission mode").
        '--permission-mode',
        'bypassPermissions',
        ...(turn.session ? ['--resume', turn.session] : []),
        ...(settings.modelId ? ['--model', settings.modelId] : []),
        ...(EFFORTS.has(effort) ? ['--effort', effort] : []),
        ...(basePromptFile ? ['--append-system-prompt-file', basePromptFile] : []),
        ...(mcp ? ['--mcp-config', mcp, '--strict-mcp-config'] : []),
      ];
    },
    translate: (line) => translateClaude(line, { secretName: settings.secretName }),
  };
}

/**
 * The run's MCP servers as Claude Code's config file, in the workspace (mode 0600; its credentials
 * were opened for this run by the service and never go on a command line). A `warp_id` server has
 * nothing to start here and is left out.
 */
function mcpConfig(servers: unknown, dir: string, notices: string[]): string | undefined {
  if (!servers || typeof servers !== 'object') return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(servers as Record<string, any>)) {
    if (typeof s?.command === 'string')
      out[name] = { command: s.command, args: s.args ?? [], env: s.env ?? {} };
    else if (typeof s?.url === 'string') out[name] = { type: 'http', url: s.url, headers: s.headers ?? {} };
    else notices.push(`MCP server "${name}" names no command or URL (warp_id): Claude Code cannot start it`);
  }
  if (!Object.keys(out).length) return undefined;
  const file = join(dir, 'mcp.json');
  writeFileSync(file, JSON.stringify({ mcpServers: out }), { mode: 0o600 });
  chmodSync(file, 0o600);
  return file;
}

/**
 * The team's skills (factory-skills/<factory>/skills/<name>/SKILL.md) as Claude Code project
 * skills (.claude/skills/<name>/), so that its Skill tool can load them by name.
 */
function linkSkills(workspace: string): void {
  const root = join(workspace, 'factory-skills');
  if (!existsSync(root)) return;
  for (const factory of readdirSync(root)) {
    const skills = join(root, factory, 'skills');
    if (!existsSync(skills)) continue;
    for (const name of readdirSync(skills)) {
      const target = join(workspace, '.claude', 'skills', name);
      if (existsSync(join(skills, name, 'SKILL.md')) && !existsSync(target))
        cpSync(join(skills, name), target, { recursive: true });
    }
  }
}
