/**
 * A harness launcher: a small Node process (a worker runs one per core at most, harness-process.ts)
 * that starts harnesses and owns their process groups (harness-process.ts is the worker's side; `LauncherRequest` and
 * `LauncherReport` are the protocol, over Node's IPC channel).
 *
 * Why a process of its own: a fork copies the forking process's page tables, so spawning from the
 * worker (the whole service, when service-hosted) blocks its event loop for milliseconds per run; from
 * this small process it costs less and happens on the other core. And Node has no PDEATHSIG: when the
 * worker dies, however abruptly, this process sees its IPC channel close and kills every live group.
 *
 * Plain Node built-ins only: it is started from the built file and must start fast.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import {
  containerName,
  dockerRunArgs,
  ensureImage,
  imageProblem,
  keepFailed,
  removeContainer,
  removeContainersSync,
  signalContainer,
  type ContainerPlacement,
} from '../backends/docker.js';
import {
  harnessOwner,
  harnessSpawn,
  leaseUid,
  releaseUid,
  type HarnessEgress,
  type HarnessSandbox,
} from './sandbox.js';

/** A file of the workspace: its path inside it (checked by the worker) and its content. */
export interface WorkspaceFile {
  path: string;
  data: string;
  encoding: 'base64' | 'utf8';
}

/** What to start: a shell command line in a fresh workspace. */
export interface HarnessSpec {
  command: string;
  /**
   * The workspace: made afresh with `files` before the spawn (mode 0700, owned by the harness's
   * user), removed once the run is done.
   */
  cwd: string;
  files: WorkspaceFile[];
  /** The harness's whole environment (sandbox.ts: harnessEnvironment); nothing of the launcher's own. */
  env: Record<string, string>;
  sandbox: HarnessSandbox;
  /** The run's way out of its sandbox's network namespace (egress-proxy.ts); none: no network at all. */
  egress?: HarnessEgress;
  /** SIGTERM, then SIGKILL this much later, when the harness is stopped or leaves processes behind. */
  graceMs: number;
  /** Written to the harness's stdin at once (its first input). */
  stdin: string;
  /** The Docker backend: the image and network the run's environment asks for. */
  placement?: ContainerPlacement;
  /**
   * The environment's repositories, cloned by the worker into its cache's staging folder: moved to
   * `path` in the workspace and given to the harness's user before anything runs.
   */
  repositories?: Array<{ from: string; path: string }>;
  /**
   * The environment's setup commands: run in turn before the harness, each like the harness (same
   * sandbox, user, workspace and environment) but with no input; their output is reported as stream
   * 3. The first that fails ends the job: the harness never starts.
   */
  setup?: string[];
}

export type LauncherRequest =
  | ({ t: 'spawn'; id: number } & HarnessSpec)
  | { t: 'write'; id: number; data: string }
  /** The worker took the last `output` report: more may be read and sent. */
  | { t: 'ack'; id: number }
  | { t: 'stop'; id: number };

/** Complete lines from stdout (1) or stderr (2), or a setup command's output (3), in the order they were read. */
export type OutputLines = Array<[1 | 2 | 3, string]>;

/** How a setup command ended. */
export interface SetupExit {
  index: number;
  command: string;
  code: number | null;
  signal: string | null;
}

/** How a harness ended: its exit code, or the signal that killed it; or the setup command that failed. */
export interface HarnessExit {
  code: number | null;
  signal: string | null;
  /** Set when a setup command failed (or was stopped): the harness never started. */
  setupFailed?: SetupExit;
}

export type LauncherReport =
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'output'; id: number; lines: OutputLines }
  /** A setup command succeeded (its output was reported before this). */
  | { t: 'setup'; id: number; lines: OutputLines; exit: SetupExit }
  /**
   * The leader exited, its group is gone and its output was read (or the grace period ran out);
   * `lines`: the output not reported yet.
   */
  | ({ t: 'done'; id: number; lines: OutputLines } & HarnessExit);

/**
 * Output is reported at most this long after it was read: lines read meanwhile (and a harness's last
 * lines with its end) share one message.
 */
const OUTPUT_EVERY_MS = 2;
/**
 * Back-pressure: one `output` report at a time is on its way to the worker (until its `ack`), and
 * while it is, the harness's pipes are no longer read once this much output waits here. The harness
 * then blocks on its writes; what it prints costs this process and the worker bounded memory.
 */
const OUTPUT_HIGH_BYTES = 256 * 1024;
/**
 * A line longer than this (characters) is cut into lines of this length: an artifact's line (1 MiB
 * of content in base64) fits; a harness that never prints a newline does not hold more than this.
 */
const MAX_LINE = 2 * 1024 * 1024;

interface Job {
  child: ChildProcess;
  cwd: string;
  /** Who owns the workspace (its uid decides whether the folder may be reused). */
  owner: number;
  /** The group's id (the leader's pid); undefined if the spawn failed. */
  pgid?: number;
  /** The leader is bwrap: the harness is a session of its own under the sandbox's init. */
  inBwrap: boolean;
  /** The uid leased for this harness (`user` mode), released once its group is gone. */
  leased?: number;
  graceMs: number;
  /** When the group is stopped: SIGTERM now, SIGKILL from this time on. */
  killAt?: number;
  output: OutputLines;
  /** Characters in `output`. */
  outputSize: number;
  outputTimer?: NodeJS.Timeout;
  /** The Docker backend: the harness's container (the leader is its `docker run`). */
  container?: { cli: string; name: string; keepFailedSeconds: number; signalled?: 'SIGTERM' | 'SIGKILL' };
  /** An `output` report is on its way: the next waits for its `ack`. */
  awaitingAck: boolean;
  /** The harness's stdout and stderr, paused while too much output waits. */
  pipes: Readable[];
  /** Setup commands not run yet. */
  setupLeft: string[];
  setupDone: number;
}

const jobs = new Map<number, Job>();
/** Containers waiting for their image (ensureImage); a stop meanwhile takes the id out. */
const awaitingImage = new Set<number>();
const send = (report: LauncherReport) => process.send!(report);

type SpawnRequest = Extract<LauncherRequest, { t: 'spawn' }>;

/** A container's image is checked (and pulled once if missing) before the harness starts. */
function start(req: SpawnRequest): void {
  if (req.sandbox.mode !== 'docker') return startHarness(req);
  const image = req.placement?.image ?? req.sandbox.image;
  const refused = imageProblem(image);
  if (refused) return notStarted(req.id, refused);
  awaitingImage.add(req.id);
  void ensureImage(req.sandbox.docker, image).then((problem) => {
    // A stop while the image was checked took the id out: the harness never starts.
    if (!awaitingImage.delete(req.id))
      send({ t: 'done', id: req.id, code: null, signal: 'SIGTERM', lines: [] });
    else if (problem) notStarted(req.id, problem);
    else startHarness(req);
  });
}

/** Docker's own status for "the container could not be run", with the reason. */
function notStarted(id: number, why: string): void {
  send({ t: 'done', id, code: 125, signal: null, lines: [[2, `factoryd: ${why}`]] });
}

function startHarness(req: SpawnRequest): void {
  const leased = req.sandbox.mode === 'user' ? leaseUid(req.sandbox.uids) : undefined;
  const owner = leased !== undefined ? { uid: leased, gid: leased } : harnessOwner(req.sandbox);
  try {
    if (req.sandbox.mode === 'user' && leased === undefined)
      throw new Error('every uid of HARNESS_UIDS is in use by a live harness');
    prepareWorkspace(req.cwd, req.files, owner);
    for (const r of req.repositories ?? []) placeRepository(req.cwd, r, owner);
    // The run's proxy socket is its harness's alone (mode 0600): in `user` mode other uids share the machine.
    if (req.egress && owner) chownSync(req.egress.socket, owner.uid, owner.gid);
    // A container's uid is not the service's: the socket is bound into this container alone, and its
    // folder on the host stays closed to other users.
    else if (req.egress && req.sandbox.mode === 'docker') chmodSync(req.egress.socket, 0o666);
  } catch (err) {
    if (leased !== undefined) releaseUid(leased);
    const message = `factoryd could not prepare the workspace: ${(err as Error).message}`;
    send({ t: 'done', id: req.id, code: 127, signal: null, lines: [[2, message]] });
    return;
  }
  const job: Job = {
    child: undefined as unknown as ChildProcess,
    inBwrap: req.sandbox.mode === 'bwrap',
    leased,
    owner: owner?.uid ?? process.getuid!(),
    graceMs: req.graceMs,
    cwd: req.cwd,
    output: [],
    outputSize: 0,
    awaitingAck: false,
    pipes: [],
    setupLeft: [...(req.setup ?? [])],
    setupDone: 0,
  };
  jobs.set(req.id, job);
  next(req, job, owner);
}

/**
 * Starts the job's next process: its next setup command, or the harness once none is left. On the
 * Docker backend each is a container of its own (the harness's name, `-setup-<n>` for a setup
 * command), the workspace mounted in each.
 */
function next(req: SpawnRequest, job: Job, owner: { uid: number; gid: number } | undefined): void {
  const setup = job.setupLeft.length ? { index: job.setupDone, command: job.setupLeft.shift()! } : undefined;
  const command = setup?.command ?? req.command;
  const docker = req.sandbox.mode === 'docker' ? req.sandbox : undefined;
  const name = docker && containerName(req.cwd) + (setup ? `-setup-${setup.index}` : '');
  const { file, args, uid, gid } =
    docker && name
      ? {
          file: docker.docker,
          args: dockerRunArgs(docker, { ...req, command, name }),
          uid: undefined,
          gid: undefined,
        }
      : harnessSpawn(req.sandbox, command, req.cwd, owner, req.egress);
  const child = spawn(file, args, {
    cwd: req.cwd,
    // `docker run` passes the harness's variables on by name; DOCKER_HOST is for the CLI alone.
    env: docker && process.env.DOCKER_HOST ? { ...req.env, DOCKER_HOST: process.env.DOCKER_HOST } : req.env,
    uid,
    gid,
    detached: true, // its own process group: a stop reaches every process the harness started
    stdio: [setup ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  job.child = child;
  job.pgid = child.pid;
  job.pipes = [child.stdout!, child.stderr!];
  job.container =
    docker && name ? { cli: docker.docker, name, keepFailedSeconds: docker.keepFailedSeconds } : undefined;
  if (child.pid) send({ t: 'spawned', id: req.id, pid: child.pid });
  if (!setup) {
    child.stdin!.on('error', () => undefined); // a harness may exit without reading its input
    child.stdin!.write(req.stdin);
  }
  const read = [
    lines(req.id, job, child.stdout!, setup ? 3 : 1),
    lines(req.id, job, child.stderr!, setup ? 3 : 2),
  ];
  child.once('error', (err) => {
    if (child.pid) return; // a spawned child's errors are its pipes'; its exit decides
    job.output.push([2, `the ${setup ? 'setup command' : 'harness'} could not be started: ${err.message}`]);
    finish(req.id, {
      code: 127,
      signal: null,
      ...(setup ? { setupFailed: { ...setup, code: 127, signal: null } } : {}),
    });
  });
  child.once('exit', (code, signal) => {
    // Anything the leader left in its group goes too; then the output still in the pipes is read.
    void reap(job).then(async () => {
      await Promise.race([Promise.all(read), delay(job.graceMs)]);
      if (!setup) return finish(req.id, { code, signal });
      const exit: SetupExit = { ...setup, code, signal };
      // Stopped meanwhile (a cancel), or failed: the harness never starts.
      if (code !== 0 || job.killAt !== undefined) return finish(req.id, { code, signal, setupFailed: exit });
      if (job.container) void removeContainer(job.container.cli, job.container.name);
      job.setupDone++;
      clearTimeout(job.outputTimer);
      job.outputTimer = undefined;
      send({ t: 'setup', id: req.id, lines: job.output, exit });
      job.output = [];
      job.outputSize = 0;
      next(req, job, owner);
    });
  });
}

/** A staged clone moved to its folder in the workspace, every file of it the harness's user's. */
function placeRepository(
  cwd: string,
  r: { from: string; path: string },
  owner: { uid: number; gid: number } | undefined,
): void {
  const dest = join(cwd, r.path);
  if (!dest.startsWith(cwd + '/')) throw new Error(`${r.path} is not inside the workspace`);
  for (let dir = dirname(dest), todo: string[] = []; ; dir = dirname(dir)) {
    if (dir === cwd || lstatSync(dir, { throwIfNoEntry: false })?.isDirectory()) {
      for (const d of todo.reverse()) {
        mkdirSync(d, { mode: WORKSPACE_MODE });
        if (owner) chownSync(d, owner.uid, owner.gid);
      }
      break;
    }
    todo.push(dir);
  }
  renameSync(r.from, dest);
  if (owner) chownTree(dest, owner);
}

function chownTree(path: string, owner: { uid: number; gid: number }): void {
  lchownSync(path, owner.uid, owner.gid);
  if (!lstatSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownTree(join(path, entry), owner);
}

function finish(id: number, exit: HarnessExit): void {
  const job = jobs.get(id);
  if (!job) return;
  jobs.delete(id);
  job.child.stdin?.destroy();
  job.child.stdout?.destroy();
  job.child.stderr?.destroy();
  clearTimeout(job.outputTimer);
  // Out of its name before the worker hears of the end: once the worker knows, it may remove its folder.
  const retired = retire(job.cwd);
  send({ t: 'done', id, ...exit, lines: job.output });
  // A container's folder is never a spare: a container not gone yet still has it mounted.
  if (retired && job.container) discard(retired);
  else if (retired) keepAsSpare(retired, job.owner);
  if (job.container)
    endContainer(job.container, job.killAt === undefined && (exit.code !== 0 || exit.signal !== null));
  if (job.leased !== undefined) releaseUid(job.leased);
}

/**
 * Workspace folders emptied after their run, renamed into place for the next spawn rather than a
 * folder made and removed per run. Why: both cost an inode, and on ext4 without a journal each new
 * inode is checked against every inode the group freed recently, so a folder per run came to cost
 * more CPU than the fork itself (a third of the launcher's time in bench/runs-exec). Renaming
 * allocates nothing. A spare holds nothing of its last run: it is kept only once empty, with the
 * mode a new folder gets (0700) and the owner it had.
 */
const spares: string[] = [];
const MAX_SPARES = 8;
let retiredCount = 0;
const WORKSPACE_MODE = 0o700;

/** The workspace renamed out of the way (a spare-to-be, `.retired-…`), or removed if that failed. */
function retire(cwd: string): string | undefined {
  const retired = join(dirname(cwd), `.retired-${process.pid}-${++retiredCount}`);
  try {
    renameSync(cwd, retired);
    return retired;
  } catch {
    discard(cwd);
    return undefined;
  }
}

/**
 * Kept once empty. What the harness left is removed in the thread pool (a walk of it must not hold
 * up other spawns); an empty folder, the usual case, is checked at once, which costs less than a
 * round through the pool.
 */
function keepAsSpare(dir: string, owner: number): void {
  let left: string[];
  try {
    left = readdirSync(dir);
  } catch {
    return discard(dir);
  }
  if (!left.length) return keepIfFresh(dir, owner);
  void Promise.all(left.map((e) => rm(join(dir, e), { recursive: true, force: true }))).then(
    () => keepIfFresh(dir, owner),
    () => discard(dir),
  );
}

function keepIfFresh(dir: string, owner: number): void {
  try {
    const st = lstatSync(dir);
    if (
      spares.length < MAX_SPARES &&
      st.isDirectory() &&
      (st.mode & 0o7777) === WORKSPACE_MODE &&
      st.uid === owner
    ) {
      // Named `.spare-…` in the same step as it is kept: a folder of that name is one the next spawn takes.
      const spare = dir.replace(/\.retired-(?=[^/]*$)/, '.spare-');
      renameSync(dir, spare);
      spares.push(spare);
      return;
    }
  } catch {
    /* removed below */
  }
  discard(dir);
}

function discard(dir: string): void {
  void rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/**
 * The workspace afresh (anything left from an earlier try of this execution goes) with its files,
 * all of it the harness's user's and no one else's.
 */
function prepareWorkspace(cwd: string, files: WorkspaceFile[], owner?: { uid: number; gid: number }): void {
  if (!fromSpare(cwd)) {
    mkdirSync(dirname(cwd), { recursive: true });
    try {
      mkdirSync(cwd, { mode: WORKSPACE_MODE });
    } catch {
      rmSync(cwd, { recursive: true, force: true });
      mkdirSync(cwd, { mode: WORKSPACE_MODE });
    }
  }
  // Also a spare's: it kept its last owner, which may not be this run's.
  if (owner) chownSync(cwd, owner.uid, owner.gid);
  const made = new Set<string>([cwd]);
  const own = (path: string) => owner && chownSync(path, owner.uid, owner.gid);
  for (const f of files) {
    const path = join(cwd, f.path);
    for (let dir = dirname(path), todo: string[] = []; ; dir = dirname(dir)) {
      if (made.has(dir)) {
        for (const d of todo.reverse()) {
          mkdirSync(d, { mode: WORKSPACE_MODE });
          own(d);
          made.add(d);
        }
        break;
      }
      if (dir === dirname(dir)) throw new Error(`${f.path} is not inside the workspace`);
      todo.push(dir);
    }
    writeFileSync(path, Buffer.from(f.data, f.encoding), { mode: 0o600 });
    own(path);
  }
}

/** A spare renamed to `cwd`; false if there is none, or it could not be (then `cwd` is made afresh). */
function fromSpare(cwd: string): boolean {
  const spare = spares.pop();
  if (!spare) return false;
  try {
    // Only within the folder it came from: another worker's folder may be on its way out.
    if (dirname(spare) !== dirname(cwd)) throw new Error('another folder');
    renameSync(spare, cwd); // fails if `cwd` is left from an earlier try and not empty
    return true;
  } catch {
    discard(spare);
    return false;
  }
}

/** Sends the output read so far, unless a report is still on its way (its `ack` sends the rest). */
function sendOutput(id: number, job: Job): void {
  if (job.awaitingAck || !jobs.has(id) || !job.output.length) return;
  send({ t: 'output', id, lines: job.output });
  job.output = [];
  job.outputSize = 0;
  job.awaitingAck = true;
}

/** The worker took the last report: the rest goes, and the pipes are read again. */
function acknowledged(id: number, job: Job): void {
  job.awaitingAck = false;
  sendOutput(id, job);
  for (const pipe of job.pipes) pipe.resume();
}

/** Splits a stream into lines (UTF-8 safe) for the job's output; resolves at its end. */
function lines(id: number, job: Job, stream: Readable, s: 1 | 2 | 3): Promise<void> {
  stream.setEncoding('utf8');
  let partial = '';
  const add = (line: string) => {
    job.output.push([s, line]);
    job.outputSize += line.length;
    job.outputTimer ??= setTimeout(() => {
      job.outputTimer = undefined;
      sendOutput(id, job);
    }, OUTPUT_EVERY_MS);
  };
  return new Promise((resolve) => {
    stream.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop()!;
      for (const line of parts) add(line.replace(/\r$/, ''));
      for (; partial.length > MAX_LINE; partial = partial.slice(MAX_LINE)) add(partial.slice(0, MAX_LINE));
      if (job.awaitingAck && job.outputSize >= OUTPUT_HIGH_BYTES) for (const pipe of job.pipes) pipe.pause();
    });
    const end = () => {
      if (partial) add(partial);
      partial = '';
      resolve();
    };
    stream.once('end', end);
    stream.once('close', end);
    stream.on('error', () => undefined);
  });
}

/**
 * A container whose harness failed on its own is kept for a while (WORKER_DOCKER_KEEP_FAILED_SECONDS);
 * any other (succeeded, or stopped: cancel, timeout, shutdown) is removed now.
 */
function endContainer(c: NonNullable<Job['container']>, failed: boolean): void {
  if (failed && c.keepFailedSeconds > 0) keepFailed(c.cli, c.name, c.keepFailedSeconds);
  else void removeContainer(c.cli, c.name);
}

/** SIGTERM to the harness's group, SIGKILL once the grace period is over. */
function stop(job: Job): void {
  job.killAt ??= Date.now() + job.graceMs;
  signal(job, Date.now() < job.killAt ? 'SIGTERM' : 'SIGKILL');
}

/** Until no process of the group is left: SIGTERM, then SIGKILL after the grace period. */
async function reap(job: Job): Promise<void> {
  while (groupAlive(job)) {
    stop(job);
    await delay(20);
  }
}

function groupAlive(job: Job): boolean {
  if (!job.pgid) return false;
  try {
    process.kill(-job.pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(job: Job, sig: NodeJS.Signals): void {
  if (!job.pgid) return;
  if (job.container) return signalInContainer(job, job.container, sig);
  // In bwrap, SIGTERM goes to the harness's session (bwrap's init made it): bwrap itself ends at
  // SIGTERM, and its sandbox with it at once, which would leave the harness no grace. SIGKILL, or a
  // harness not started yet, goes to bwrap, and ends everything in its sandbox.
  const session = job.inBwrap ? sandboxSession(job.pgid) : undefined;
  for (const group of [session, sig === 'SIGKILL' || !session ? job.pgid : undefined]) {
    if (group)
      try {
        process.kill(-group, sig);
      } catch {
        /* the group is gone */
      }
  }
}

/**
 * The harness in a container: SIGTERM through Docker's init to the harness; SIGKILL removes the
 * container (everything in it) and ends its `docker run`. Each is sent once.
 */
function signalInContainer(job: Job, c: NonNullable<Job['container']>, sig: NodeJS.Signals): void {
  if (sig === 'SIGTERM') {
    if (c.signalled) return;
    c.signalled = 'SIGTERM';
    return signalContainer(c.cli, c.name, 'SIGTERM');
  }
  if (c.signalled === 'SIGKILL') return;
  c.signalled = 'SIGKILL';
  void removeContainer(c.cli, c.name).then(() => {
    try {
      process.kill(-job.pgid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
  });
}

/** The sandbox's init (bwrap's only child), whose pid is the harness's session and group. */
function sandboxSession(bwrapPid: number): number | undefined {
  try {
    const init = Number(readFileSync(`/proc/${bwrapPid}/task/${bwrapPid}/children`, 'utf8').split(' ')[0]);
    return init > 0 ? init : undefined;
  } catch {
    return undefined;
  }
}

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref());

if (process.send) {
  process.on('message', (req: LauncherRequest) => {
    if (req.t === 'spawn') return start(req);
    if (req.t === 'stop' && awaitingImage.delete(req.id)) return;
    const job = jobs.get(req.id);
    if (!job) return;
    if (req.t === 'write') {
      if (job.child.stdin?.writable) job.child.stdin.write(req.data);
    } else if (req.t === 'ack') {
      acknowledged(req.id, job);
    } else {
      job.child.stdin?.end();
      stop(job);
      // The leader may ignore SIGTERM: its group gets SIGKILL once the grace period is over.
      setTimeout(() => jobs.get(req.id) === job && stop(job), job.graceMs + 5).unref();
    }
  });
  // The worker is gone (however it died): nothing of its runs may outlive it.
  process.on('disconnect', () => {
    const containers = [...jobs.values()].flatMap((j) => (j.container ? [j.container] : []));
    for (const job of jobs.values()) if (job.pgid && !job.container) signal(job, 'SIGKILL');
    // Waited for: a container outlives its `docker run`, and this process is about to exit.
    if (containers.length)
      removeContainersSync(
        containers[0]!.cli,
        containers.map((c) => c.name),
      );
    process.exit(0);
  });
}
