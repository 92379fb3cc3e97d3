import type { HarnessExit, HarnessSpec, SetupExit } from '../launcher/launcher.js';

/** Which of a harness's outputs a line came from: its stdout, its stderr, or an environment setup command's. */
export type OutputStream = 'stdout' | 'stderr' | 'setup';

/** One harness, wherever it runs: its input, its stop, its end. */
export interface HarnessHandle {
  /** Its processes are gone and its output was read. */
  readonly finished: Promise<HarnessExit>;
  /** One line of the harness protocol to its stdin (a follow-up, an interrupt, a cancel). */
  write(line: string): void;
  /** SIGTERM (stdin closed), everything killed after the grace period; resolves at the end. */
  stop(): Promise<HarnessExit>;
}

/**
 * Where a worker's harnesses run (docs/scale-out.md, "A Kubernetes backend"). The worker claims runs,
 * renews their leases and reports their events; a backend only starts a harness from its spec (the
 * command, the workspace and its files, the allow-listed environment, the sandbox settings, the
 * placement the run's environment asks for), carries protocol lines both ways and stops it.
 *
 * The local backend (harness-process.ts) serves both of today's: `host` (bwrap, a uid of its own, or
 * none: sandbox.ts) and `docker` (a container per run: docker.ts), started from the worker's
 * launchers so that a dead worker's harnesses die with it. A Kubernetes backend would create a Job
 * per run and attach to its pod instead.
 */
export interface RunBackend {
  /**
   * `caughtUp`: back-pressure — while it returns a promise, the backend reads no more of the
   * harness's output than it holds already (the worker's reports are behind).
   */
  start(
    spec: HarnessSpec,
    onLine: (stream: OutputStream, line: string) => void,
    caughtUp?: () => Promise<void> | undefined,
    /** Each environment setup command that succeeded (the first that fails ends the harness's start). */
    onSetup?: (exit: SetupExit) => void,
  ): HarnessHandle;
  /** What dead predecessors left behind (orphaned containers, expired kept ones); never throws. */
  sweep(): Promise<void>;
}
