/**
 * The built-in Gemini CLI harness, run as the harness command (dist/harnesses/gemini.harness.js, with
 * the service's Node): the generic runner around the Gemini CLI adapter.
 */
import { harnessSettings, runAdapter } from './adapter-runner.js';
import { geminiAdapter } from './gemini-adapter.js';

const settings = harnessSettings();
runAdapter(geminiAdapter(settings), settings);
