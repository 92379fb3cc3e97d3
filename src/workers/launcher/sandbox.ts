/**
 * The harness sandbox: what a harness can reach of the machine that runs it (docs/security.md, "The
 * harness sandbox"). A harness is a team's agent, and teams trust each other with nothing: it gets an
 * allow-listed environment, a workspace no other run can read, and, where the machine allows, a
 * bubblewrap sandbox (own PID namespace, the file system read-only except its workspace, the
 * service's folders not there at all) as an unprivileged user.
 *
 * The launcher (launcher.ts) imports this file: plain Node built-ins only.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  chownSync,
  closeSync,
  constants,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import { unsearchableAbove } from '../../common/searchable.js';
import { ROOT_STATE_DIR } from '../../common/shared-runtime.js';
import { dockerCli, engineProblem, harnessPaths, type DockerSandbox } from '../backends/docker.js';

export type HarnessSandbox =
  | { mode: 'none' }
  /**
   * The service is root; each live harness runs as a uid of its own from `uids` (its gid the same
   * number), leased by the launcher for the harness's life (leaseUid), in a network and mount
   * namespace of its own made as root with `tools` (util-linux, iproute2) before it drops to that uid.
   */
  | { mode: 'user'; uids: { first: number; last: number }; tools: UserModeTools; hidden: string[] }
  /**
   * Inside bubblewrap (`bwrap`, an absolute path), as `uid`/`gid` when the service is root (else as the
   * service's user); `mounts`: what hides the service's folders, before the workspace is bound in;
   * `hidden`: the folders those mounts empty.
   */
  | { mode: 'bwrap'; bwrap: string; uid?: number; gid?: number; mounts: string[]; hidden: string[] }
  /** A container per harness (WORKER_BACKEND=docker: backends/docker.ts). */
  | DockerSandbox;

/** Absolute paths of the programs `user` mode confines a harness with. */
export interface UserModeTools {
  unshare: string;
  setpriv: string;
  mount: string;
  ip: string;
}

/**
 * A run's way out of its network namespace (egress-proxy.ts): `socket`, its proxy's Unix socket on
 * this machine (bound at EGRESS_SOCKET_INSIDE in the sandbox), and `forwarder`, the program and
 * arguments that run the harness command under the forwarder there.
 */
export interface HarnessEgress {
  socket: string;
  forwarder: string[];
}

/** Where the run's egress socket appears inside the sandbox (egress-proxy.ts: EGRESS_SOCKET_INSIDE). */
const SOCKET_INSIDE = '/run/factoryd/egress.sock';

/**
 * Who owns a workspace and runs its harness when that is fixed: bwrap's user. Undefined for the
 * service's own user, and in `user` mode, where the launcher leases a uid per harness (leaseUid).
 */
export function harnessOwner(s: HarnessSandbox): { uid: number; gid: number } | undefined {
  if (s.mode === 'docker') return process.getuid?.() === 0 ? { uid: s.uid, gid: s.gid } : undefined;
  return s.mode === 'bwrap' && s.uid !== undefined ? { uid: s.uid, gid: s.gid! } : undefined;
}

/**
 * Namespaces and ties of every bwrap sandbox: its own PID namespace (its /proc shows its own processes
 * only), IPC namespace and network namespace (nothing but its own loopback: the egress forwarder is
 * its only way out), SIGKILL when the launcher dies, and a session of its own (no terminal to push
 * input into).
 */
const BWRAP_ISOLATION = [
  '--unshare-pid',
  '--unshare-ipc',
  '--unshare-net',
  '--die-with-parent',
  '--new-session',
];

/**
 * `user` mode's confinement, run as root in the new network and mount namespaces (`unshare --net
 * --mount`): loopback up, an empty /run with the run's egress socket in it, /dev/null over every
 * other listening socket, then the harness's uid (no groups, no new privileges) for the rest.
 * Arguments: ip, setpriv, mount, uid, egress socket (or ''), folders to empty, `--`, sockets to cover, `--`, command.
 */
const USER_MODE_SETUP = `set -e
ip=$1 setpriv=$2 mount=$3 uid=$4 sock=$5; shift 5
"$ip" link set lo up
while [ "$1" != -- ]; do "$mount" -t tmpfs -o mode=0755 factoryd "$1"; shift; done; shift
if [ -n "$sock" ]; then mkdir -p ${SOCKET_INSIDE.slice(0, SOCKET_INSIDE.lastIndexOf('/'))}; : > ${SOCKET_INSIDE}; "$mount" --bind "$sock" ${SOCKET_INSIDE}; fi
while [ "$1" != -- ]; do "$mount" --bind /dev/null "$1"; shift; done; shift
exec "$setpriv" --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs -- "$@"`;

/** The program and arguments that start the shell command line `command` in `cwd`, confined. */
export function harnessSpawn(
  s: HarnessSandbox,
  command: string,
  cwd: string,
  owner = harnessOwner(s),
  egress?: HarnessEgress,
): { file: string; args: string[]; uid?: number; gid?: number } {
  if (s.mode === 'docker') throw new Error('a container starts by `docker run` (backends/docker.ts)');
  const shell = ['/bin/sh', '-c', command];
  if (s.mode === 'none') return { file: '/bin/sh', args: shell.slice(1), ...owner };
  const inner = egress ? [...egress.forwarder, ...shell] : shell;
  const sockets = listeningSockets(s.hidden, owner);
  if (s.mode === 'user') {
    const { unshare, setpriv, mount, ip } = s.tools;
    return {
      file: unshare,
      args: [
        '--net',
        '--mount',
        '--',
        '/bin/sh',
        '-c',
        USER_MODE_SETUP,
        'factoryd-sandbox',
        ip,
        setpriv,
        mount,
        String(owner!.uid),
        egress?.socket ?? '',
        ...s.hidden,
        '--',
        ...sockets,
        '--',
        ...inner,
      ],
    };
  }
  return {
    file: s.bwrap,
    args: [
      ...s.mounts,
      ...(egress ? ['--bind', egress.socket, SOCKET_INSIDE] : []),
      ...sockets.flatMap((path) => ['--ro-bind', '/dev/null', path]),
      '--bind',
      cwd,
      cwd,
      '--chdir',
      cwd,
      ...BWRAP_ISOLATION,
      '--',
      ...inner,
    ],
    ...owner,
  };
}

/**
 * The machine's listening Unix sockets (/proc/net/unix) that the harness's user could connect to and
 * that no emptied folder (`hidden`) already hides: a database's socket, Docker's, a desktop bus. A
 * network namespace does not stop connect() on a socket's path, so each gets /dev/null over it. Read
 * at every spawn: a socket made since the start is covered too.
 */
function listeningSockets(
  hidden: readonly string[],
  owner: { uid: number; gid: number } | undefined,
): string[] {
  let table: string;
  try {
    table = readFileSync('/proc/net/unix', 'utf8');
  } catch {
    return [];
  }
  const found = new Set<string>();
  for (const line of table.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    // Num RefCount Protocol Flags Type St Inode Path; flag 0x10000: listening.
    if (fields.length < 8 || fields[3] !== '00010000' || !fields[7]!.startsWith('/')) continue;
    try {
      const path = realpathSync(fields.slice(7).join(' '));
      if (hidden.some((dir) => inside(path, dir))) continue;
      if (lstatSync(path).isSocket() && connectable(path, owner)) found.add(path);
    } catch {
      /* gone, or not reachable from here */
    }
  }
  return [...found];
}

/** `path` is `dir` or lies in it. */
const inside = (path: string, dir: string) => dir === sep || (path + sep).startsWith(dir + sep);

/** Whether `owner` (undefined: this process's own user) may connect to the socket at `path`. */
function connectable(path: string, owner: { uid: number; gid: number } | undefined): boolean {
  if (!owner) {
    try {
      accessSync(path, constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }
  const may = (p: string, bit: number) => {
    const st = statSync(p);
    const shift = st.uid === owner.uid ? 6 : st.gid === owner.gid ? 3 : 0;
    return ((st.mode >> shift) & bit) !== 0;
  };
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if (!may(dir, 1)) return false;
    if (dir === '/') break;
  }
  return may(path, 2);
}

/** What every harness gets of the service's environment, besides the names the operator allows. */
const BASICS = ['PATH', 'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'LC_MESSAGES', 'TZ', 'TERM'];

/**
 * A harness's whole environment: the basics and the operator's HARNESS_ENV_ALLOW names (config.ts
 * refuses the service's own variables there) from the service's environment, HOME in the workspace,
 * and the run's own variables.
 */
export function harnessEnvironment(
  run: Record<string, string>,
  workspace: string,
  allow: readonly string[],
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of [...BASICS, ...allow]) if (from[name] !== undefined) env[name] = from[name];
  return { ...env, HOME: workspace, ...run };
}

export interface SandboxChoice {
  sandbox: HarnessSandbox;
  /** For the start's log: the mode and why. */
  description: string;
}

export interface SandboxSettings {
  /** HARNESS_SANDBOX; undefined: the strongest that works here. */
  requested?: 'bwrap' | 'user' | 'none';
  harnessUser: { uid: number; gid: number };
  harnessUids: { first: number; last: number };
  /** Where the service keeps its state (DATA_DIR): never visible in a bwrap sandbox. */
  dataDir: string;
  /** The package's own folder (the examples harnesses run from): visible, read-only. */
  packageRoot: string;
  /** WORKER_BACKEND=docker: the container settings (WORKER_DOCKER_*); the host's sandbox otherwise. */
  docker?: Omit<DockerSandbox, 'mode' | 'docker' | 'uid' | 'gid' | 'readOnly'> & { mounts: string[] };
  /**
   * Folders a harness needs that may lie inside a hidden one (the agent CLIs' install folder under
   * DATA_DIR): bound back, read-only, where they exist.
   */
  visible?: string[];
}

const chosen = new Map<string, SandboxChoice>();

/**
 * The sandbox for harnesses with workspaces under `workspaceRoot`: HARNESS_SANDBOX, or the strongest
 * this machine runs (bwrap is tried once, with a harness's own mounts: it may be installed yet unable
 * to make namespaces). An explicit mode that cannot work stops the start (SandboxUnavailable). Also
 * makes the workspace root reachable by the harnesses' user but not listable.
 */
export function chooseSandbox(settings: SandboxSettings, workspaceRoot: string): SandboxChoice {
  const key = `${settings.docker ? 'docker' : (settings.requested ?? '')}:${workspaceRoot}:${(settings.visible ?? []).join(':')}`;
  let choice = chosen.get(key);
  if (!choice) chosen.set(key, (choice = choose(settings, workspaceRoot)));
  return choice;
}

export class SandboxUnavailable extends Error {}

function choose(settings: SandboxSettings, workspaceRoot: string): SandboxChoice {
  const { requested } = settings;
  const root = process.getuid?.() === 0;
  const user = root ? settings.harnessUser : undefined;
  prepareWorkspaceRoot(workspaceRoot, settings.dataDir, user);
  if (settings.docker) return dockerChoice(settings, settings.docker, user);
  if (requested === 'none') return { sandbox: { mode: 'none' }, description: 'none (HARNESS_SANDBOX=none)' };
  const asUser = user
    ? `as uid ${user.uid}:${user.gid}`
    : `as the service's own user (not root: HARNESS_UID does not apply)`;
  let bwrapFailure = '';
  if (requested === undefined || requested === 'bwrap') {
    const sandbox = bwrapSandbox(settings, workspaceRoot, user);
    bwrapFailure = typeof sandbox === 'string' ? sandbox : '';
    if (typeof sandbox !== 'string') return { sandbox, description: `bwrap, ${asUser}` };
    if (requested === 'bwrap') throw new SandboxUnavailable(`bwrap cannot run here: ${bwrapFailure}`);
  }
  const fallback = bwrapFailure ? ` (bwrap cannot run here: ${bwrapFailure})` : '';
  if (user) {
    const { first, last } = settings.harnessUids;
    const sandbox = userSandbox(settings, workspaceRoot);
    if (typeof sandbox !== 'string') {
      mkdirSync(UID_LEASES, { recursive: true, mode: 0o700 });
      return {
        sandbox,
        description: `user, each harness as a uid of its own from ${first}-${last}${fallback}`,
      };
    }
    if (requested === 'user') throw new SandboxUnavailable(`user cannot run here: ${sandbox}`);
    return {
      sandbox: { mode: 'none' },
      description: `none: harnesses run unconfined${fallback}; user mode: ${sandbox}`,
    };
  }
  if (requested === 'user')
    throw new SandboxUnavailable('user needs the service to run as root (to switch to HARNESS_UID)');
  return {
    sandbox: { mode: 'none' },
    description: `none: harnesses run as the service's own user, unconfined${fallback}`,
  };
}

/** Folders emptied in every sandbox: where a machine keeps its services' sockets and pid files. */
function runFolders(): string[] {
  return ['/run', '/var/run'].filter((dir) => {
    try {
      return lstatSync(dir).isDirectory(); // /var/run is usually a link to /run
    } catch {
      return false;
    }
  });
}

/** A `user` sandbox that was seen to confine a shell here, or why it cannot. */
function userSandbox(settings: SandboxSettings, workspaceRoot: string): HarnessSandbox | string {
  const find = (name: string, dirs: string[]) => dirs.map((d) => join(d, name)).find((p) => existsSync(p));
  const bins = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'];
  const tools = {
    unshare: find('unshare', bins),
    setpriv: find('setpriv', bins),
    mount: find('mount', bins),
    ip: find('ip', bins),
  };
  const missing = Object.entries(tools).filter(([, p]) => !p);
  if (missing.length)
    return `${missing.map(([n]) => n).join(', ')} not found (Debian: apt-get install util-linux iproute2)`;
  const sandbox: HarnessSandbox = {
    mode: 'user',
    uids: settings.harnessUids,
    tools: tools as UserModeTools,
    hidden: runFolders(),
  };
  const uid = settings.harnessUids.first;
  return probe(sandbox, workspaceRoot, { uid, gid: uid });
}

/**
 * The Docker backend, once the Engine answered. Inside, the harness runs as HARNESS_UID when the
 * service is root, else as the service's own uid (a member of the `docker` group).
 */
function dockerChoice(
  settings: SandboxSettings,
  { mounts, ...docker }: NonNullable<SandboxSettings['docker']>,
  user: { uid: number; gid: number } | undefined,
): SandboxChoice {
  const cli = dockerCli();
  const problem = engineProblem(cli);
  if (problem) throw new SandboxUnavailable(problem);
  const { uid, gid } = user ?? { uid: process.getuid!(), gid: process.getgid!() };
  const sandbox: DockerSandbox = {
    mode: 'docker',
    docker: cli!,
    uid,
    gid,
    // The agent CLIs' install folder too: a container runs the worker's CLIs, not the image's.
    readOnly: [
      ...harnessPaths(settings.packageRoot),
      ...(settings.visible ?? []).filter((p) => existsSync(p)),
      ...mounts,
    ],
    ...docker,
  };
  return {
    sandbox,
    description:
      `docker, image ${docker.image} unless the environment names one, as uid ${uid}:${gid}, ` +
      `cpus ${docker.cpus}, memory ${docker.memory}, ${docker.pids} processes, network ${docker.network}`,
  };
}

/**
 * The workspace root (and, when it lies in DATA_DIR, DATA_DIR and the folders between) may be
 * traversed by the harnesses' user, never listed; DATA_DIR's managed repositories are the service's
 * alone (a harness outside bwrap could otherwise read them by path).
 */
function prepareWorkspaceRoot(
  workspaceRoot: string,
  dataDir: string,
  user: { uid: number; gid: number } | undefined,
): void {
  ownFolder(workspaceRoot, 0o711);
  if (!user || !(workspaceRoot + sep).startsWith(dataDir + sep)) return;
  for (let dir = dirname(workspaceRoot); (dir + sep).startsWith(dataDir + sep); dir = dirname(dir))
    chmodSync(dir, (statSync(dir).mode & 0o700) | 0o011);
  mkdirSync(join(dataDir, 'factories'), { recursive: true, mode: 0o700 });
  chmodSync(join(dataDir, 'factories'), 0o700);
}

/** A bwrap sandbox that was seen to start a shell in a workspace here, or why it cannot. */
function bwrapSandbox(
  settings: SandboxSettings,
  workspaceRoot: string,
  user: { uid: number; gid: number } | undefined,
): HarnessSandbox | string {
  const bwrap = ['/usr/bin/bwrap', '/usr/local/bin/bwrap', '/bin/bwrap'].find((p) => existsSync(p));
  if (!bwrap) return 'not installed (Debian: apt-get install bubblewrap)';
  const sandbox: HarnessSandbox = {
    mode: 'bwrap',
    bwrap,
    ...user,
    ...hidingMounts(settings, workspaceRoot),
  };
  return probe(sandbox, workspaceRoot, user);
}

/**
 * `sandbox` itself when it was seen to start a shell that writes into a workspace here (made as the
 * harness's `owner`), else why not, in a line.
 */
function probe(
  sandbox: HarnessSandbox,
  workspaceRoot: string,
  owner: { uid: number; gid: number } | undefined,
): HarnessSandbox | string {
  const dir = mkdtempSync(join(workspaceRoot, '.sandbox-probe-'));
  try {
    chmodSync(dir, 0o700);
    if (owner) chownSync(dir, owner.uid, owner.gid);
    const { file, args, uid, gid } = harnessSpawn(sandbox, 'touch ok', dir, owner);
    const out = spawnSync(file, args, {
      cwd: dir,
      uid,
      gid,
      env: { PATH: process.env.PATH },
      encoding: 'utf8',
      timeout: 10_000,
    });
    if (out.status === 0 && existsSync(join(dir, 'ok'))) return sandbox;
    return (out.stderr || out.error?.message || `exit ${out.status ?? out.signal}`).trim().split('\n')[0]!;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The whole file system read-only; a private /tmp and /run (the usual home of services' sockets: the
 * sandbox's own network namespace does not stop connect() on a socket's path); empty folders over the service's home (a non-root
 * service's user keeps its credentials there), DATA_DIR (database cluster, secrets key, managed
 * repositories, workspaces), the package's `var` and the workspace root. The package and Node.js stay
 * visible where they lie in a hidden folder: the example harnesses run from them.
 */
function hidingMounts(
  settings: SandboxSettings,
  workspaceRoot: string,
): { mounts: string[]; hidden: string[] } {
  const mounts = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc'];
  const hidden: string[] = [];
  // bwrap runs as the harness's user, and cannot bind what that user cannot reach (a checkout in a
  // `mktemp -d`, as root): its programs then run from copies (harness-programs.ts).
  const reachable = (path: string) =>
    process.getuid?.() !== 0 || ((statSync(path).mode & 0o001) !== 0 && !unsearchableAbove(path));
  // An empty folder over `dir`, with the package and Node.js bound back where they lie inside it (a
  // checkout in /tmp, an install in a home folder).
  const cover = (dir: string) => {
    mounts.push('--tmpfs', dir);
    hidden.push(dir);
    for (const keep of [settings.packageRoot, dirname(dirname(process.execPath))])
      if (inside(keep, dir) && reachable(keep)) mounts.push('--ro-bind', keep, keep);
  };
  cover('/tmp');
  for (const dir of runFolders()) cover(dir);
  const home = homedir();
  if (process.getuid?.() !== 0 && home !== '/' && existsSync(home)) cover(home);
  for (const hide of [settings.dataDir, join(settings.packageRoot, 'var'), workspaceRoot, egressRoot()]) {
    if (!existsSync(hide) || hidden.some((h) => inside(hide, h) && !inside(settings.packageRoot, h)))
      continue;
    // Out of the harness's reach already (below /root, a `mktemp -d`); bwrap, as that user, could
    // not even make the mount point.
    if (process.getuid?.() === 0 && unsearchableAbove(hide)) continue;
    mounts.push('--tmpfs', hide);
    hidden.push(hide);
  }
  for (const keep of settings.visible ?? [])
    if (existsSync(keep) && hidden.some((h) => inside(keep, h))) mounts.push('--ro-bind', keep, keep);
  return { mounts, hidden };
}

/**
 * Where the egress proxies of this machine's workers keep their runs' sockets (egress-proxy.ts), made
 * here, passable by every uid and not listable. As root, harnesses run as other uids that must pass
 * through every folder above their socket (bwrap binds it as that uid), so not in TMPDIR, which may
 * be closed. A bwrap sandbox gets an empty folder over it: in bwrap every harness has the same uid,
 * and only the socket bound in at EGRESS_SOCKET_INSIDE may be its way out. In `user` mode each
 * socket is its uid's alone (0600).
 */
export function egressRoot(): string {
  const dir =
    process.getuid?.() === 0
      ? join(ROOT_STATE_DIR, 'egress')
      : join(tmpdir(), `factoryd-egress-${process.getuid?.()}`);
  ownFolder(dir, 0o711);
  return dir;
}

/**
 * `dir` made, or found as a folder of this process's user, then set to `mode`. In a shared TMPDIR
 * another user may have made the name first, or made it a link to a folder of ours elsewhere: the
 * chmod would fail with a bare EPERM, or open that other folder to the harnesses. Refused, saying so.
 */
function ownFolder(dir: string, mode: number): void {
  mkdirSync(dir, { recursive: true, mode });
  const found = lstatSync(dir);
  const uid = process.getuid?.();
  const wrong = found.isSymbolicLink()
    ? 'a symbolic link'
    : !found.isDirectory()
      ? 'not a folder'
      : uid !== undefined && found.uid !== uid
        ? `a folder of uid ${found.uid}`
        : undefined;
  if (wrong)
    throw new Error(
      `${dir} is ${wrong}, not a folder of this user's (uid ${uid}): factoryd keeps harness workspaces ` +
        'and sockets only in folders it made itself. Remove it, or start with TMPDIR (DATA_DIR for the ' +
        'service) set to a folder of your own',
    );
  chmodSync(dir, mode);
}

/**
 * Leases of `user` mode's uids, one file per uid in use holding its launcher's pid, shared by every
 * worker on the machine (all root). A lease whose launcher is gone is taken over.
 */
const UID_LEASES = '/run/factoryd/harness-uids';

/** A uid of `uids` no live harness on this machine runs as, leased to the caller; undefined if none is free. */
export function leaseUid(uids: { first: number; last: number }): number | undefined {
  const count = uids.last - uids.first + 1;
  const start = Math.floor(Math.random() * count); // launchers rarely try the same uids
  for (let i = 0; i < count; i++) {
    const uid = uids.first + ((start + i) % count);
    if (tryLease(uid) || (leaseIsStale(uid) && tryLease(uid))) return uid;
  }
  return undefined;
}

function tryLease(uid: number): boolean {
  try {
    const fd = openSync(`${UID_LEASES}/${uid}`, 'wx', 0o600);
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      mkdirSync(UID_LEASES, { recursive: true, mode: 0o700 });
    return false;
  }
}

/** The lease's launcher is gone (killed): the lease is removed, and every process of the uid killed. */
function leaseIsStale(uid: number): boolean {
  try {
    const pid = Number(readFileSync(`${UID_LEASES}/${uid}`, 'utf8'));
    if (pid > 0 && pid !== process.pid) process.kill(pid, 0);
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') return false;
    killAllOf(uid);
    rmSync(`${UID_LEASES}/${uid}`, { force: true });
    return true;
  }
}

/**
 * Ends the lease once the harness is gone, and with it every process still running as its uid (one
 * that left the harness's process group): the uid's next harness must find nothing of this run.
 */
export function releaseUid(uid: number): void {
  const kill = spawn('/bin/sh', ['-c', 'kill -9 -1'], { uid, gid: uid, stdio: 'ignore', env: {} });
  const release = () => {
    try {
      unlinkSync(`${UID_LEASES}/${uid}`);
    } catch {
      /* already gone */
    }
  };
  kill.once('exit', release);
  kill.once('error', release);
}

/** kill(-1) as `uid`: SIGKILL to every process that runs as it. */
function killAllOf(uid: number): void {
  spawnSync('/bin/sh', ['-c', 'kill -9 -1'], { uid, gid: uid, stdio: 'ignore', env: {} });
}
