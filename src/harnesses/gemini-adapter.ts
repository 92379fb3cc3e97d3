/**
 * Gemini CLI as a built-in harness (docs/harnesses.md, "Gemini CLI"): `gemini --prompt …
 * --output-format stream-json` per turn, `--resume <session>` for the next, in the run's workspace,
 * inside the harness sandbox. The program itself is gemini.harness.ts.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CliAdapter, HarnessSettings } from './adapter-runner.js';
import { GeminiStream } from './gemini-stream.js';
import { explainProviderFailure, GEMINI } from './stream-common.js';

/**
 * Gemini CLI retries a per-minute 429, a 5xx or a refused connection up to 10 times (about four
 * minutes; a model it picks itself has its own attempts, not the `general.maxAttempts` setting), and
 * a per-minute quota after the minute the provider suggests, each time. Each retry prints "Attempt N
 * failed…" to its diagnostics: a rate limit's first ends the turn (its next try is a minute away),
 * others' third (two retries, as for Claude Code) — FAILED with the provider's answer.
 */
export const GEMINI_RETRY_NOTICES = 3;
const RATE_LIMITED = /\b429\b|quota|rate.?limit|resource.?exhausted|too many requests/i;
const RETRY_NOTICE = /^\s*Attempt \d+ failed\b/i;

export function geminiAdapter(settings: HarnessSettings): CliAdapter {
  // Gemini CLI keeps settings, memory and sessions in <GEMINI_CLI_HOME>/.gemini: the run's workspace.
  const dir = join(settings.workspace, '.gemini');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const notices: string[] = [];
  const harness = (settings.config.harness ?? {}) as Record<string, unknown>;
  if (typeof harness.reasoning_level === 'string' && harness.reasoning_level)
    notices.push(
      `reasoning_level "${harness.reasoning_level}" is not passed: Gemini CLI has no flag for it (it uses the model's own thinking setting)`,
    );
  const file = {
    // The key from GEMINI_API_KEY, the base URL from GOOGLE_GEMINI_BASE_URL.
    security: { auth: { selectedType: 'gemini-api-key' } },
    // Only the model's API is called from inside a run: no usage statistics, no update checks.
    privacy: { usageStatisticsEnabled: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    mcpServers: mcpServers(settings.config.mcp_servers, notices),
  };
  writeFileSync(join(dir, 'settings.json'), JSON.stringify(file, null, 2), { mode: 0o600 });
  const stream = new GeminiStream({ secretName: settings.secretName });
  let memoryWritten = false;
  let retries = 0;
  return {
    title: 'Gemini CLI',
    notices,
    env: {
      GEMINI_CLI_HOME: settings.workspace,
      // Headless: the workspace is trusted without a prompt, and the CLI does not relaunch itself in
      // a second Node process (seconds of start-up on a busy machine).
      GEMINI_CLI_TRUST_WORKSPACE: 'true',
      GEMINI_CLI_NO_RELAUNCH: 'true',
    },
    args: (turn) => {
      retries = 0; // counted per turn
      // The run's base prompt joins Gemini CLI's system instruction as its global memory file.
      if (turn.basePrompt && !memoryWritten) {
        writeFileSync(join(dir, 'GEMINI.md'), `${turn.basePrompt}\n`, { mode: 0o600 });
        memoryWritten = true;
      }
      return [
        '--output-format',
        'stream-json',
        // Nobody can answer an approval prompt headless: factoryd's sandbox is the boundary
        // (docs/harnesses.md).
        '--approval-mode',
        'yolo',
        ...(settings.modelId ? ['--model', settings.modelId] : []),
        ...(turn.session ? ['--resume', turn.session] : []),
        `--prompt=${turn.text}`,
      ];
    },
    translate: (line) => stream.translate(line),
    diagnostic: (line) => {
      if (!RETRY_NOTICE.test(line)) return [];
      // The pause it announces is no status code ("Retrying after 4290ms"): left out of what is read.
      const said = line.replace(/Retrying (after \d+ ?ms|with backoff)\.*/i, '').trim();
      if (++retries < GEMINI_RETRY_NOTICES && !RATE_LIMITED.test(said)) return [];
      return [
        {
          type: 'fatal',
          message: `${explainProviderFailure(GEMINI, 'Gemini CLI', said, settings.secretName)} (stopped after ${retries} failed attempt${retries > 1 ? 's' : ''}; Gemini CLI would retry for minutes)`,
        },
      ];
    },
  };
}

/** The run's MCP servers as Gemini CLI's `mcpServers`; a `warp_id` server has nothing to start here. */
function mcpServers(servers: unknown, notices: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!servers || typeof servers !== 'object') return out;
  for (const [name, s] of Object.entries(servers as Record<string, any>)) {
    if (typeof s?.command === 'string')
      out[name] = { command: s.command, args: s.args ?? [], env: s.env ?? {} };
    else if (typeof s?.url === 'string') out[name] = { httpUrl: s.url, headers: s.headers ?? {} };
    else notices.push(`MCP server "${name}" names no command or URL (warp_id): Gemini CLI cannot start it`);
  }
  return out;
}
