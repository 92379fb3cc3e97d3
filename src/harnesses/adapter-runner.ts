/**
 * The generic side of a built-in harness (docs/harnesses.md): a small Node program run as the harness
 * command inside the run's sandbox. It reads factoryd's protocol on stdin (prompt, followup, cancel,
 * interrupt), runs one CLI turn at a time in a process group of its own, resumes the CLI's session
 * for the next turn, writes every raw CLI line to stderr (the run's transcript) and the translated
 * protocol events to stdout, and exits with the run's outcome. Node built-ins only: it runs from
 * dist/harnesses/ with the service's Node, as the harness's user.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { createInterface } from 'node:readline';
import { pushedBranches, remoteRefs } from './pushed-branches.js';

/** A protocol event on stdout (docs/workers.md, "Harness protocol"; `usage` per the harness API). */
export type ProtocolEvent = Record<string, unknown> & { type: string };

/**
 * What a translator makes of one CLI line: protocol events, and what the runner itself needs
 * (never written out): the CLI's session id, a file the CLI wrote, the turn's end, or a provider
 * failure that retrying will not mend (the turn is stopped at once).
 */
export type AdapterEvent =
  | ProtocolEvent
  | { type: 'session'; id: string }
  | { type: 'wrote'; path: string }
  | { type: 'turn_end'; ok: boolean; message: string }
  | { type: 'fatal'; message: string };

/** One turn the runner asks the CLI for. */
export interface Turn {
  text: string;
  /** The CLI's session to resume (undefined on the first turn). */
  session?: string;
  /** The run's base prompt (the agent's, with its skill): the CLI's system prompt. */
  basePrompt?: string;
}

/** What a CLI adapter tells the runner: how to start a turn and how to read its output. */
export interface CliAdapter {
  /** As people call it ("Claude Code"): in status messages. */
  title: string;
  /** The CLI's arguments for a turn. */
  args(turn: Turn): string[];
  /** Variables the CLI gets besides the harness's own. */
  env?: Record<string, string>;
  /** One JSON line of the CLI's stdout (parsed) → events. */
  translate(line: unknown): AdapterEvent[];
  /** What the run should know of its configuration that the CLI cannot honour: system messages. */
  notices?: string[];
  /** Why a turn that printed no end failed: from its exit code and its last stderr lines. */
  failure?(code: number | null, stderr: string[]): string;
  /**
   * One line of the CLI's diagnostics (stderr, or a stdout line that is not JSON) → events: a
   * `fatal` stops the turn (a CLI retrying a failing provider for minutes: gemini-adapter.ts).
   */
  diagnostic?(line: string): AdapterEvent[];
}

/** The settings every adapter reads from the harness's environment (set by the worker). */
export interface HarnessSettings {
  /** The CLI's executable (FACTORYD_HARNESS_CLI, found by the worker). */
  cli: string;
  workspace: string;
  /** The run's agent config (FACTORYD_AGENT_CONFIG). */
  config: Record<string, unknown>;
  modelId?: string;
  /** The team secret the provider key came from: named in messages, its value never. */
  secretName?: string;
}

export function harnessSettings(env: NodeJS.ProcessEnv = process.env): HarnessSettings {
  let config: Record<string, unknown> = {};
  try {
    config = JSON.parse(env.FACTORYD_AGENT_CONFIG ?? '{}') as Record<string, unknown>;
  } catch {
    /* an empty config */
  }
  const harness = (config.harness ?? {}) as Record<string, unknown>;
  const model = [harness.model_id, env.FACTORYD_MODEL_ID].find((m) => typeof m === 'string' && m);
  return {
    cli: env.FACTORYD_HARNESS_CLI ?? '',
    workspace: env.FACTORYD_WORKSPACE ?? process.cwd(),
    config,
    modelId: model as string | undefined,
    secretName: env.FACTORYD_HARNESS_SECRET || undefined,
  };
}

/**
 * SIGINT (an interrupt) or SIGTERM (a cancel, the worker stopping the harness) to the CLI's group,
 * then SIGKILL this much later — or sooner when the worker's own grace for the whole harness
 * (HARNESS_KILL_GRACE_MS, as FACTORYD_KILL_GRACE_MS) leaves less, so that this runner is still there
 * to take the CLI's group with it.
 */
const STOP_GRACE_MS = 2000;
export function stopGraceMs(env: NodeJS.ProcessEnv = process.env): number {
  const worker = Number(env.FACTORYD_KILL_GRACE_MS);
  return Number.isFinite(worker) && env.FACTORYD_KILL_GRACE_MS
    ? Math.max(0, Math.min(STOP_GRACE_MS, worker - 500))
    : STOP_GRACE_MS;
}
/** A FILE artifact is at most this large (docs/workers.md, "Artifacts"). */
const MAX_FILE_BYTES = 1024 * 1024;
const STDERR_TAIL = 5;

/**
 * Runs the adapter until the run is over: exit 0 when its last turn succeeded, 1 when it failed,
 * 130 when cancelled.
 */
export function runAdapter(adapter: CliAdapter, settings: HarnessSettings = harnessSettings()): void {
  const emit = (e: ProtocolEvent) => process.stdout.write(`${JSON.stringify(e)}\n`);
  const queue: string[] = [];
  let session: string | undefined;
  let basePrompt: string | undefined;
  let current: ChildProcess | undefined;
  let interrupted = false;
  let inputClosed = false;
  let ok = true;

  if (!settings.cli) {
    emit({
      type: 'result',
      status: 'failed',
      message: `${adapter.title} is not installed on this worker: run \`factoryd harnesses install\` for it, or set its *_COMMAND variable`,
    });
    process.exit(1);
  }

  const grace = stopGraceMs();
  const killGroup = (pid: number) => {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  const stopGroup = (signal: NodeJS.Signals) => {
    const child = current;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      /* gone */
    }
    if (signal !== 'SIGKILL') setTimeout(() => killGroup(child.pid!), grace).unref();
  };

  /**
   * Cancel, or the worker stopping the harness: SIGTERM to the CLI's group, SIGKILL once `grace` is
   * over (what the group left behind too, when the CLI exits sooner), then exit 130. Once: the
   * launcher repeats its SIGTERM until this process is gone.
   */
  let stopping = false;
  const stopAndExit = () => {
    if (stopping) return;
    stopping = true;
    const child = current;
    if (!child?.pid || child.exitCode !== null || child.signalCode !== null) process.exit(130);
    const end = () => {
      killGroup(child.pid!);
      process.exit(130);
    };
    child.once('exit', end);
    setTimeout(end, grace);
    stopGroup('SIGTERM');
  };

  for (const text of adapter.notices ?? []) emit({ type: 'message', role: 'system', text });

  // The worker stops the harness's own group; the CLI's is another: it goes with it.
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, stopAndExit);
  process.on('exit', () => stopGroup('SIGKILL'));

  const turn = (text: string) =>
    new Promise<void>((done) => {
      const wrote = new Set<string>();
      const stderr: string[] = [];
      let end: { ok: boolean; message: string } | undefined;
      let fatal: string | undefined;
      const diagnostic = (line: string) => {
        for (const e of adapter.diagnostic?.(line) ?? [])
          if (e.type === 'fatal') {
            fatal ??= String(e.message);
            stopGroup('SIGTERM');
          } else if (e.type !== 'session' && e.type !== 'wrote' && e.type !== 'turn_end') emit(e);
      };
      // The repositories' remote-tracking refs before the turn: a `git push` moves them (below).
      const refsBefore = remoteRefs(settings.workspace);
      const child = spawn(settings.cli, adapter.args({ text, session, basePrompt }), {
        cwd: settings.workspace,
        env: { ...process.env, ...adapter.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true, // a process group of its own: interrupt and cancel stop all of it
      });
      current = child;
      createInterface({ input: child.stdout! }).on('line', (line) => {
        process.stderr.write(`${line}\n`); // the raw stream: the run's transcript
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          diagnostic(line);
          return;
        }
        for (const e of adapter.translate(parsed)) {
          if (e.type === 'session') session = String(e.id);
          else if (e.type === 'wrote') wrote.add(String(e.path));
          else if (e.type === 'turn_end') end = { ok: e.ok === true, message: String(e.message) };
          else if (e.type === 'fatal') {
            fatal ??= String(e.message);
            stopGroup('SIGTERM');
          } else emit(e);
        }
      });
      createInterface({ input: child.stderr! }).on('line', (line) => {
        process.stderr.write(`${line}\n`);
        stderr.push(line);
        if (stderr.length > STDERR_TAIL) stderr.shift();
        diagnostic(line);
      });
      child.on('error', (err) => {
        fatal ??= `${adapter.title} could not be started (${settings.cli}): ${err.message}`;
      });
      child.on('close', (code) => {
        current = undefined;
        for (const path of wrote) {
          const artifact = fileArtifact(settings.workspace, path);
          if (artifact) emit(artifact);
        }
        // Branches the agent pushed in this turn, whatever tool it pushed them with.
        for (const artifact of pushedBranches(settings.workspace, refsBefore)) emit(artifact);
        if (interrupted) {
          done();
          return;
        }
        const outcome = fatal
          ? { ok: false, message: fatal }
          : (end ?? {
              // Each CLI ends a finished turn with its result event: an exit without one, even 0,
              // is a turn that never finished (a CLI that could not write its temporary files
              // exits 0 having said nothing), never a success.
              ok: false,
              message:
                code === 0
                  ? `exited without finishing its turn (no result in its output)${stderr.length ? `: ${stderr.join(' / ')}` : ''}`
                  : (adapter.failure?.(code, stderr) ??
                    `${adapter.title} exited with code ${code}${stderr.length ? `: ${stderr.join(' / ')}` : ''}`),
            });
        ok = outcome.ok;
        emit({
          type: 'result',
          status: outcome.ok ? 'succeeded' : 'failed',
          message: outcome.ok ? outcome.message : `${adapter.title}: ${outcome.message}`,
        });
        done();
      });
    });

  let busy = false;
  const drain = async () => {
    if (busy) return;
    busy = true;
    while (queue.length && !interrupted && ok) await turn(queue.shift()!);
    busy = false;
    if (interrupted) {
      emit({ type: 'status', state: 'BLOCKED', message: 'interrupted; send a follow-up to continue' });
      return;
    }
    // The run ends when its turns are done; a follow-up after that continues it as a new execution.
    if (!queue.length || !ok) process.exit(ok ? 0 : 1);
  };

  createInterface({ input: process.stdin })
    .on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (msg.type === 'cancel') {
        stopAndExit();
      } else if (msg.type === 'interrupt') {
        if (!current) return;
        interrupted = true;
        stopGroup('SIGINT');
      } else if (msg.type === 'prompt') {
        if (typeof msg.base_prompt === 'string' && msg.base_prompt) basePrompt = msg.base_prompt;
        queue.push(firstTurnText(msg));
        void drain();
      } else if (msg.type === 'followup' && typeof msg.message === 'string') {
        queue.push(msg.message);
        interrupted = false;
        void drain();
      }
    })
    .on('close', () => {
      inputClosed = true;
      if (!busy && !interrupted && !queue.length) process.exit(ok ? 0 : 1);
    });
  void inputClosed;
}

/** The first turn: the conversation so far (a continued run), the prompt and the follow-ups it queued. */
function firstTurnText(msg: Record<string, unknown>): string {
  const history = Array.isArray(msg.history) ? (msg.history as Array<{ role: string; text: string }>) : [];
  const followups = Array.isArray(msg.followups) ? msg.followups.filter((f) => typeof f === 'string') : [];
  const attachments = Array.isArray(msg.attachments) ? msg.attachments : [];
  const parts = [
    ...(history.length
      ? [`Earlier in this conversation:\n${history.map((h) => `${h.role}: ${h.text}`).join('\n')}`]
      : []),
    String(msg.prompt ?? ''),
    ...(followups as string[]),
    ...(attachments.length
      ? [`Files given with this task, in the working directory: ${attachments.join(', ')}`]
      : []),
  ];
  return parts.filter(Boolean).join('\n\n');
}

/** A file the CLI wrote, inside the workspace and small enough, as a FILE artifact. */
function fileArtifact(workspace: string, path: string): ProtocolEvent | undefined {
  const full = isAbsolute(path) ? path : resolve(workspace, path);
  const rel = relative(workspace, full);
  if (!rel || rel.startsWith('..') || isAbsolute(rel) || rel.split(sep).includes('.claude')) return undefined;
  try {
    const st = statSync(full);
    if (!st.isFile() || st.size > MAX_FILE_BYTES) return undefined;
    return {
      type: 'artifact',
      artifact_type: 'FILE',
      filepath: rel,
      data: readFileSync(full).toString('base64'),
    };
  } catch {
    return undefined; // written, then removed
  }
}
