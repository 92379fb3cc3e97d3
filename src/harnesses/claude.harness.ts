/**
 * The built-in Claude Code harness, run as the harness command (dist/harnesses/claude.harness.js,
 * with the service's Node): the generic runner around the Claude Code adapter.
 */
import { harnessSettings, runAdapter } from './adapter-runner.js';
import { claudeAdapter } from './claude-adapter.js';

const settings = harnessSettings();
runAdapter(claudeAdapter(settings), settings);
