#!/usr/bin/env node
// The built-in `gemini` harness: runs Google's Gemini CLI (`gemini -p … --output-format stream-json`)
// in the run's workspace (docs/harnesses.md, "Gemini CLI"). Node built-ins only, besides the
// translator: it runs in the sandbox.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCliAdapter, runSettings } from './cli-adapter.js';
import { GeminiStream } from './gemini-stream.js';

const workspace = process.cwd();
const settings = runSettings();
// Gemini CLI keeps settings, memory and sessions under <home>/.gemini; the workspace is the run's alone.
const geminiDir = join(workspace, '.gemini');

runCliAdapter({
  name: 'gemini',
  command: process.env.GEMINI_COMMAND || 'gemini',
  secretVariables: ['GEMINI_API_KEY'],
  env: {
    GEMINI_CLI_HOME: workspace,
    // No folder-trust prompt (headless), and no relaunch of itself into a second Node process.
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    GEMINI_CLI_NO_RELAUNCH: 'true',
  },
  prepare(basePrompt) {
    mkdirSync(geminiDir, { recursive: true, mode: 0o700 });
    const mcpServers = Object.fromEntries(
      Object.entries(settings.mcpServers).map(([name, s]) => [
        name,
        'url' in s
          ? { httpUrl: s.url, headers: s.headers ?? {} }
          : { command: s.command, args: s.args ?? [], env: s.env ?? {} },
      ]),
    );
    const file = {
      // The key comes from GEMINI_API_KEY (and the base URL from GOOGLE_GEMINI_BASE_URL).
      security: { auth: { selectedType: 'gemini-api-key' } },
      // Nothing leaves the sandbox but the model calls: no usage statistics, no update checks.
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      mcpServers,
    };
    writeFileSync(join(geminiDir, 'settings.json'), JSON.stringify(file, null, 2), { mode: 0o600 });
    // The run's base prompt joins Gemini CLI's system instruction as its global memory file.
    if (basePrompt) writeFileSync(join(geminiDir, 'GEMINI.md'), `${basePrompt}\n`, { mode: 0o600 });
  },
  // Approval mode yolo: nobody is there to answer a prompt; factoryd's sandbox confines the agent.
  args: (session) => [
    '--output-format',
    'stream-json',
    '--approval-mode',
    'yolo',
    ...(settings.model ? ['--model', settings.model] : []),
    ...(session ? ['--resume', session] : []),
    '--prompt',
    '', // the text comes on stdin
  ],
  stream: () => new GeminiStream(),
});
