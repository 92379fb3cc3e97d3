#!/usr/bin/env node
// Claude Code as a team's harness command: HARNESS_COMMAND="node examples/harness/claude-code.js".
// The logic is factoryd's built-in Claude Code harness (src/harnesses/, built into dist/harnesses/),
// which a run gets without this file by `config.harness.type: claude` (docs/harnesses.md). Here the
// CLI is CLAUDE_COMMAND (a path) or `claude` on PATH, and the key is the harness's own environment's.
process.env.FACTORYD_HARNESS_CLI ??= process.env.CLAUDE_COMMAND || 'claude';
await import('../../dist/harnesses/claude.harness.js');
