import { spawn, type ChildProcess } from 'node:child_process';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { CONFIG, SERVICE_VARIABLES, type Config } from '../config/config.js';
import { ALLOWED_TRANSPORTS } from './repository-url.js';

/** After SIGTERM, how long a git call's process group may take to end before SIGKILL. */
const KILL_GRACE_MS = 1000;
/** An HTTP transfer slower than this (bytes per second) for the stall time is cut by git itself. */
const LOW_SPEED_BYTES_PER_SECOND = 1000;
/** How much of git's stderr is kept for an error message (its end: where git says what failed). */
const STDERR_KEPT = 8192;

/** A git call that ran past GIT_TIMEOUT_SECONDS; its whole process group was ended. */
export class GitTimedOut extends Error {
  constructor(
    subcommand: string,
    readonly seconds: number,
  ) {
    super(`git ${subcommand} timed out after ${seconds} s`);
  }
}

/** A git call ended, or not started, because the service is shutting down: not a failure of the repository. */
export class GitStopped extends Error {}

/** A git call that exited unsuccessfully; the message is what git said on stderr. */
class GitFailed extends Error {
  constructor(subcommand: string, stderr: string, exit: string) {
    super(stderr || `git ${subcommand} exited with ${exit}`);
  }
}

/**
 * The one way factoryd runs git. A call never waits on a person or a dead peer: no terminal prompt,
 * ssh in batch mode with a connect timeout, an HTTP low-speed limit, and a time limit
 * (GIT_TIMEOUT_SECONDS) on the whole call. Each call runs in its own process group, because git
 * starts helpers (git-remote-https, ssh) that a signal to git alone would leave behind; a timeout or
 * a shutdown ends the group: SIGTERM (git removes its lock files), SIGKILL after a grace period.
 */
@Injectable()
export class GitRunner implements OnApplicationShutdown {
  /** Each running call and how to end it. */
  private readonly running = new Map<ChildProcess, (why: Error) => void>();
  private stopped = false;
  private readonly timeoutSeconds: number;
  private readonly options: string[];
  private readonly env: NodeJS.ProcessEnv;

  constructor(@Inject(CONFIG) config: Pick<Config, 'gitTimeoutSeconds'>) {
    this.timeoutSeconds = config.gitTimeoutSeconds;
    // A stalled connection is given up after half the time limit, so git's own message ("Operation
    // too slow", "Connection timed out") says what happened before the blunt time limit does.
    const stall = Math.max(1, Math.ceil(config.gitTimeoutSeconds / 2));
    this.options = [
      '-c',
      `http.lowSpeedLimit=${LOW_SPEED_BYTES_PER_SECOND}`,
      '-c',
      `http.lowSpeedTime=${stall}`,
      // Only the transports a factory may use, on every call: not `file`, `ext::` (runs a command) or
      // a promisor remote's lazy fetch that a repository's own config could name.
      '-c',
      'protocol.allow=never',
      ...ALLOWED_TRANSPORTS.flatMap((t) => ['-c', `protocol.${t}.allow=always`]),
    ];
    this.env = {
      // Nothing of the service's own configuration or credentials: git runs helpers (ssh, credential
      // helpers, a local repository's configured commands) that need none of it.
      ...Object.fromEntries(
        Object.entries(process.env).filter(
          ([name]) => !SERVICE_VARIABLES.includes(name) && !name.startsWith('FACTORYD_'),
        ),
      ),
      GIT_TERMINAL_PROMPT: '0',
      // An operator's own GIT_SSH_COMMAND (a key, a proxy) is kept; it should say BatchMode=yes too.
      GIT_SSH_COMMAND:
        process.env.GIT_SSH_COMMAND ??
        `ssh -o BatchMode=yes -o ConnectTimeout=${stall} -o ServerAliveInterval=${stall} -o ServerAliveCountMax=1`,
    };
  }

  /**
   * `git <args>` in `cwd`, with `input` on its stdin; resolves with its stdout. `env`: variables of
   * this call alone (a credential helper's, read from its environment: never on a command line).
   * `credentials` answer the remote's question for `host` only, through a credential helper that
   * reads them from git's environment: never on a command line (any user of the machine reads those
   * in `ps`), never stored by a helper of the machine's git config (they are all reset for the call).
   */
  run(
    args: string[],
    cwd: string,
    input?: string,
    env?: Record<string, string>,
    credentials?: GitCredentials & { host: string },
  ): Promise<Buffer> {
    const subcommand = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '-c') ?? '';
    if (this.stopped)
      return Promise.reject(new GitStopped(`git ${subcommand} not started: factoryd is shutting down`));
    return new Promise((resolve, reject) => {
      const child = spawn('git', [...this.options, ...(credentials ? CREDENTIAL_OPTIONS : []), ...args], {
        cwd,
        env: {
          ...this.env,
          ...env,
          ...(credentials && {
            FACTORYD_GIT_HOST: credentials.host,
            FACTORYD_GIT_USERNAME: credentials.username,
            FACTORYD_GIT_PASSWORD: credentials.password,
          }),
        },
        detached: true, // its own process group, so that ending it reaches git's helpers
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const stdout: Buffer[] = [];
      let stderr = '';
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.running.delete(child);
        if (err) reject(err);
        else resolve(Buffer.concat(stdout));
      };
      let ended: Error | undefined;
      const end = (why: Error) => {
        if (ended) return;
        ended = why;
        endGroup(child.pid);
        // Settled when its pipes close; should a process outside the group hold them, soon after all the same.
        setTimeout(() => settle(why), 2 * KILL_GRACE_MS);
      };
      const timer = setTimeout(
        () => end(new GitTimedOut(subcommand, this.timeoutSeconds)),
        this.timeoutSeconds * 1000,
      );
      this.running.set(child, end);
      child.stdout.on('data', (c: Buffer) => stdout.push(c));
      child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-STDERR_KEPT)));
      child.stdin.on('error', () => undefined); // git may exit before it has read its input
      child.on('error', (err) => settle(err));
      // `close`, not `exit`: the pipes close once every process holding them (git's helpers too) is gone.
      child.on('close', (code, signal) =>
        settle(
          ended ??
            (code === 0 ? undefined : new GitFailed(subcommand, stderr.trim(), String(code ?? signal))),
        ),
      );
      child.stdin.end(input);
    });
  }

  /** `run`, its stdout as text. */
  async text(args: string[], cwd: string): Promise<string> {
    return (await this.run(args, cwd)).toString('utf8');
  }

  /**
   * Ends every running git call and refuses new ones; resolves once their processes are gone (or,
   * should one outlive SIGKILL's delivery, shortly after the grace period: a shutdown must end).
   */
  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    const closed = [...this.running].map(
      ([child, end]) =>
        new Promise<void>((resolve) => {
          child.once('close', () => resolve());
          end(new GitStopped('git ended: factoryd is shutting down'));
        }),
    );
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(closed),
      new Promise((resolve) => (grace = setTimeout(resolve, 2 * KILL_GRACE_MS))),
    ]);
    clearTimeout(grace);
  }
}

/**
 * An empty `credential.helper` drops the helpers of the machine's config (a `store` helper would write
 * the password to a file); the one left answers `get` for the expected host from the environment.
 */
const CREDENTIAL_OPTIONS = [
  '-c',
  'credential.helper=',
  '-c',
  'credential.helper=!f() { test "$1" = get || exit 0; while read -r l; do case "$l" in host=*) h="${l#host=}";; esac; done; test "$h" = "$FACTORYD_GIT_HOST" && printf "username=%s\\npassword=%s\\n" "$FACTORYD_GIT_USERNAME" "$FACTORYD_GIT_PASSWORD"; }; f',
];

/** What git is given when an https:// (or git://) remote asks who is fetching. */
export interface GitCredentials {
  username: string;
  password: string;
}

/** SIGTERM to the group now, SIGKILL to whatever of it is left after the grace period. */
function endGroup(pgid: number | undefined): void {
  if (!pgid) return;
  signalGroup(pgid, 'SIGTERM');
  setTimeout(() => signalGroup(pgid, 'SIGKILL'), KILL_GRACE_MS);
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* the group is gone */
  }
}
