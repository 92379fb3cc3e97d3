/**
 * The built-in Codex harness, run as the harness command (dist/harnesses/codex.harness.js, with the
 * service's Node): the generic runner around the Codex adapter.
 */
import { harnessSettings, runAdapter } from './adapter-runner.js';
import { codexAdapter } from './codex-adapter.js';

const settings = harnessSettings();
runAdapter(codexAdapter(settings), settings);
