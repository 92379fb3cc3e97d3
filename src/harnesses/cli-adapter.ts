import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { ProtocolEvent, TranslatedEvent } from './adapter-events.js';

/**
 * The loop every built-in CLI adapter shares (Node built-ins only: it runs inside the harness
 * sandbox): read the harness protocol on stdin, run the vendor CLI once per turn in the workspace,
 * resume its session for each follow-up, translate its JSON lines, and end.
 *
 * - Each line the CLI prints goes to stderr (the run's transcript); translated events to stdout.
 * - The provider key's value is replaced in everything written, whatever the CLI printed.
 * - `cancel` stops the CLI's process group and exits; `interrupt` stops the current turn only and
 *   reports BLOCKED until a follow-up resumes the session.
 * - Files the agent wrote are reported as FILE artifacts at the end of the turn that wrote them.
 */
export interface CliHarness {
  /** The CLI's name, for messages ("codex"). */
  name: string;
  /** The program to run: `<NAME>_COMMAND` or the CLI on PATH. */
  command: string;
  /** Environment variables whose values must never be printed (the provider key). */
  secretVariables: string[];
  /** Arguments of one turn: the first (no session yet) or a resume of `session`; the text goes on stdin. */
  args(session: string | undefined): string[];
  /** Called once with the run's prompt message, before the first turn (settings, system prompt). */
  prepare(basePrompt: string | undefined): void;
  /** Extra environment of the CLI (its home folder, settings), over the adapter's own. */
  env: Record<string, string>;
  /** The translator for the next turn (one per session, or one per CLI process). */
  stream(): { translate(event: unknown): TranslatedEvent[] };
}

/** What the harness protocol sends on stdin (docs/workers.md). */
interface Input {
  type?: string;
  prompt?: string;
  base_prompt?: string;
  followups?: string[];
  history?: Array<{ role: string; text: string }>;
  message?: string;
}

const GRACE_MS = Number(process.env.HARNESS_KILL_GRACE_MS ?? 3000);
const FILE_LIMIT = 1024 * 1024;

export function runCliAdapter(harness: CliHarness, workspace = process.cwd()): void {
  const secrets = harness.secretVariables
    .map((v) => process.env[v])
    .filter((v): v is string => !!v && v.length >= 4);
  const redact = (text: string) => secrets.reduce((t, s) => t.split(s).join('[redacted]'), text);
  const emit = (e: ProtocolEvent | Record<string, unknown>) =>
    process.stdout.write(`${redact(JSON.stringify(e))}\n`);
  const note = (text: string) => process.stderr.write(`${redact(text)}\n`);

  const queue: string[] = [];
  let session: string | undefined;
  let current: ChildProcess | undefined;
  let busy = false;
  let interrupted = false;
  let failure: string | undefined;

  function turn(text: string): Promise<void> {
    return new Promise((done) => {
      const stream = harness.stream();
      const written = new Set<string>();
      let ended: ProtocolEvent | undefined;
      const child = spawn(harness.command, harness.args(session), {
        cwd: workspace,
        env: { ...process.env, ...harness.env },
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true, // its own process group: cancel and interrupt stop everything it started
      });
      current = child;
      // The text goes on stdin: no length limit, and nothing of it on a command line.
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(text);
      createInterface({ input: child.stderr! }).on('line', note);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        note(line);
        let event: unknown;
        try {
          event = JSON.parse(line);
        } catch {
          return;
        }
        for (const out of stream.translate(event)) {
          if (out.type === 'session') session = out.id;
          else if (out.type === 'file_written') written.add(out.path);
          else if (out.type === 'result') ended = out;
          else emit(out);
        }
      });
      child.on('error', (err) => {
        failure = `${harness.name} could not be started (${err.message}): install it with \`factoryd harnesses install ${harness.name}\` or set ${harness.name.toUpperCase()}_COMMAND.`;
      });
      child.on('close', (code, signal) => {
        current = undefined;
        for (const path of written) reportFile(path);
        if (interrupted) return done();
        if (ended?.type === 'result' && ended.status === 'failed') failure = ended.message;
        else if (code !== 0 && !failure)
          failure = `${harness.name} exited with ${signal ? `signal ${signal}` : `status ${code}`} before ending its turn; its output is in the run's transcript.`;
        else if (ended) failure = undefined;
        if (ended) emit(ended);
        done();
      });
    });
  }

  /** A file the agent wrote, as a FILE artifact (if it is a file in the workspace and small enough). */
  function reportFile(path: string): void {
    try {
      const full = realpathSync(isAbsolute(path) ? path : resolve(workspace, path));
      const rel = relative(realpathSync(workspace), full);
      if (rel.startsWith('..') || isAbsolute(rel)) return;
      const size = statSync(full).size;
      if (size > FILE_LIMIT) {
        note(`${rel} is larger than 1 MiB: not reported as an artifact`);
        return;
      }
      emit({
        type: 'artifact',
        artifact_type: 'FILE',
        filepath: rel,
        data: readFileSync(full).toString('base64'),
      });
    } catch {
      // Deleted or moved again before the turn ended: nothing to report.
    }
  }

  async function drain(): Promise<void> {
    if (busy) return;
    busy = true;
    while (queue.length && !interrupted) await turn(queue.shift()!);
    busy = false;
    if (interrupted) return; // waits for a follow-up
    // The turn's work is done: end the execution (a later follow-up continues the run anew).
    finish();
  }

  function finish(): void {
    if (failure) {
      // The worker ends a failed run with the harness's last lines: the reason goes last.
      note(failure);
      emit({ type: 'result', status: 'failed', message: failure });
    }
    process.exit(failure ? 1 : 0);
  }

  /** SIGINT (or SIGTERM) to the CLI's process group, SIGKILL after the grace. */
  function stop(signal: NodeJS.Signals): Promise<void> {
    const child = current;
    if (!child?.pid) return Promise.resolve();
    const group = -child.pid;
    return new Promise((gone) => {
      const kill = setTimeout(() => signalGroup(group, 'SIGKILL'), GRACE_MS);
      child.once('close', () => {
        clearTimeout(kill);
        signalGroup(group, 'SIGKILL'); // anything it left behind
        gone();
      });
      signalGroup(group, signal);
    });
  }

  createInterface({ input: process.stdin })
    .on('line', (line) => {
      let msg: Input;
      try {
        msg = JSON.parse(line) as Input;
      } catch {
        return;
      }
      if (msg.type === 'cancel') {
        void stop('SIGTERM').then(() => process.exit(130));
      } else if (msg.type === 'interrupt') {
        if (!current) return;
        interrupted = true;
        void stop('SIGINT').then(() => {
          if (queue.length)
            resume(); // a follow-up came while the turn was stopping
          else
            emit({ type: 'status', state: 'BLOCKED', message: 'interrupted; send a follow-up to continue' });
        });
      } else if (msg.type === 'prompt') {
        harness.prepare(msg.base_prompt);
        queue.push(firstPrompt(msg));
        void drain();
      } else if (msg.type === 'followup' && typeof msg.message === 'string') {
        queue.push(msg.message);
        if (interrupted && !current) resume();
        else void drain();
      }
    })
    .on('close', () => {
      if (!busy && !current) process.exit(failure ? 1 : 0);
    });

  function resume(): void {
    interrupted = false;
    failure = undefined;
    void drain();
  }
}

function signalGroup(group: number, signal: NodeJS.Signals): void {
  try {
    process.kill(group, signal);
  } catch {
    // Already gone.
  }
}

/** The first turn's text: the conversation so far (a continued run), the prompt, queued follow-ups. */
function firstPrompt(msg: Input): string {
  const parts = [msg.prompt, ...(msg.followups ?? [])].filter((p): p is string => !!p);
  if (msg.history?.length)
    parts.unshift(
      `Earlier in this conversation:\n${msg.history.map((h) => `${h.role}: ${h.text}`).join('\n')}`,
    );
  return parts.join('\n\n');
}

/** An MCP server as a run's `config.mcp_servers` gives it (docs/run-api.md). */
export type McpServer =
  | { command: string; args?: string[]; env?: Record<string, string> }
  | { url: string; headers?: Record<string, string> };

/** What an adapter maps from the run's agent config (`FACTORYD_AGENT_CONFIG`) to its CLI. */
export interface RunSettings {
  model?: string;
  reasoningLevel?: string;
  mcpServers: Record<string, McpServer>;
}

export function runSettings(env: NodeJS.ProcessEnv = process.env): RunSettings {
  let config: any = {};
  try {
    config = JSON.parse(env.FACTORYD_AGENT_CONFIG ?? '{}') ?? {};
  } catch {
    // A malformed config maps to the CLI's defaults.
  }
  const text = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
  const servers: Record<string, McpServer> = {};
  for (const [name, s] of Object.entries<any>(config.mcp_servers ?? {})) {
    // `warp_id` servers name a registry factoryd does not keep: nothing to start.
    if (typeof s?.command === 'string') servers[name] = { command: s.command, args: s.args, env: s.env };
    else if (typeof s?.url === 'string') servers[name] = { url: s.url, headers: s.headers };
  }
  return {
    model: text(config.harness?.model_id) ?? text(config.model_id) ?? text(env.FACTORYD_MODEL_ID),
    reasoningLevel: text(config.harness?.reasoning_level),
    mcpServers: servers,
  };
}
