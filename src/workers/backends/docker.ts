/**
 * The Docker backend (docs/environments.md, "Docker backend"): each harness runs in a container of
 * its own, started by the `docker` CLI from the harness launcher. Why the CLI and not the Engine API
 * (dockerode): `docker run -i` hands the launcher plain stdin/stdout/stderr pipes and an exit status,
 * which is exactly the harness protocol, so the launcher's process handling, line splitting and
 * grace periods work unchanged; the API would need an attach over a hijacked HTTP connection and
 * stream demultiplexing written here. The CLI costs a process per run (bench/backends.bench.js
 * measures it) and keeps the launcher to Node built-ins, which it must be to start fast.
 *
 * What a container gets: the image, the workspace bound at its own path (the only writable place
 * besides a private /tmp), Node.js, the package's dist/ and examples/ and the operator's
 * WORKER_DOCKER_MOUNTS read-only, the CPU, memory and process limits, the network mode, and an
 * unprivileged uid with no capabilities. Never the Docker socket.
 *
 * Plain Node built-ins only: the launcher imports this file.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { imageProblem } from '../../common/docker-image.js';
import { SHARED_RUNTIME_DIR } from '../../common/shared-runtime.js';
import type { HarnessEgress } from '../launcher/sandbox.js';

export { imageProblem };

/** `none`: loopback only (the default). `bridge`: Docker's default bridge, the internet and the host. */
const DOCKER_NETWORKS = ['none', 'bridge'] as const;
export type DockerNetwork = (typeof DOCKER_NETWORKS)[number];

/** The worker's Docker settings (WORKER_DOCKER_*), fixed for its life. */
export interface DockerSandbox {
  mode: 'docker';
  /** The `docker` CLI, an absolute path. */
  docker: string;
  /** WORKER_DOCKER_IMAGE: for runs whose environment names none. */
  image: string;
  /** Who the harness runs as inside, and who owns its workspace outside. */
  uid: number;
  gid: number;
  /** `--cpus`, `--memory` (also the memory+swap limit: no swap), `--pids-limit`. */
  cpus: string;
  memory: string;
  pids: number;
  /** For runs whose environment names none. */
  network: DockerNetwork;
  /** A failed run's stopped container is kept this long for a look (0: removed at once). */
  keepFailedSeconds: number;
  /** Host paths bound read-only at the same path: Node.js, the package's harnesses, the operator's. */
  readOnly: string[];
}

/** A run's network: its environment's, else the worker's. */
export function containerNetwork(s: DockerSandbox, placement?: ContainerPlacement): DockerNetwork {
  return placement?.network ?? s.network;
}

/** What of a run's environment decides where it runs (the rest is the workspace's business). */
export interface ContainerPlacement {
  /** The environment's `docker_image`; else the worker's. */
  image?: string;
  network?: DockerNetwork;
}

/** Where Node.js is inside every container (first on PATH), whatever the image has. */
const CONTAINER_NODE = '/opt/factoryd/bin/node';
const CONTAINER_PATH = '/opt/factoryd/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const EGRESS_SOCKET = '/run/factoryd/egress.sock';

/** Labels every container of factoryd carries: how a later worker finds the ones it must remove. */
const OWNER_LABEL = 'factoryd.owner';
const KEEP_LABEL = 'factoryd.keep-failed-seconds';

/**
 * The container of the workspace `cwd`: unique per worker and run execution (the workspace is
 * `<worker folder>/<run id>-<execution>`), readable in `docker ps`.
 */
export function containerName(cwd: string): string {
  const worker = createHash('sha256').update(dirname(cwd)).digest('hex').slice(0, 10);
  return `factoryd-${basename(cwd).replace(/[^A-Za-z0-9_.-]/g, '_')}-${worker}`;
}

/**
 * Who owns a container: this machine, the launcher's pid and its start time (a pid reused by
 * another process is no longer the owner). A container whose owner is gone is an orphan.
 */
function launcherIdentity(pid = process.pid): string {
  return `${hostname()}/${pid}/${processStart(pid) ?? '?'}`;
}

function processStart(pid: number): string | undefined {
  try {
    // Field 22 of /proc/<pid>/stat, after the command name in parentheses (which may hold spaces).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // A zombie (killed, not reaped yet: its parent died too and init has not got to it) is dead.
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    return fields[19];
  } catch {
    return undefined;
  }
}

/**
 * `docker run` for one harness. The harness's variables go by name only (`-e NAME`: the CLI takes
 * the value from its own environment), never as values on a command line any process can read.
 */
export function dockerRunArgs(
  s: DockerSandbox,
  run: {
    command: string;
    cwd: string;
    env: Record<string, string>;
    placement?: ContainerPlacement;
    /** The container's name: the run's own (containerName) unless given (a setup command's). */
    name?: string;
    /**
     * The run's way out (egress-proxy.ts), for a container on the `none` network: its socket bound
     * at EGRESS_SOCKET, the command under the forwarder, run by the image's perl. A `bridge`
     * container goes out by Docker's bridge instead (docs/security.md, the Docker backend).
     */
    egress?: HarnessEgress;
  },
  owner = launcherIdentity(),
): string[] {
  // An environment's values are a team's: never read as an option of `docker run`.
  const image = run.placement?.image ?? s.image;
  const network = containerNetwork(s, run.placement);
  const refused = imageProblem(image) ?? networkProblem(network);
  if (refused) throw new Error(refused);
  const args = [
    'run',
    '-i',
    '--name',
    run.name ?? containerName(run.cwd),
    '--label',
    `${OWNER_LABEL}=${owner}`,
    '--label',
    `${KEEP_LABEL}=${s.keepFailedSeconds}`,
    '--label',
    `factoryd.workspace=${run.cwd}`,
    '--pull',
    'never', // checked (and pulled once) by ensureImage: a run never waits on a registry unasked
    '--init', // Docker's own init as PID 1: signals reach the harness, zombies are reaped
    '--user',
    `${s.uid}:${s.gid}`,
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--read-only',
    '--tmpfs',
    '/tmp:rw,nosuid,nodev,size=256m',
    '--cpus',
    s.cpus,
    '--memory',
    s.memory,
    '--memory-swap',
    s.memory,
    '--pids-limit',
    String(s.pids),
    '--network',
    network,
    '--volume',
    `${run.cwd}:${run.cwd}:rw`,
    '--workdir',
    run.cwd,
    '--volume',
    `${process.execPath}:${CONTAINER_NODE}:ro`,
  ];
  for (const path of s.readOnly) args.push('--volume', `${path}:${path}:ro`);
  const egress = network === 'none' ? run.egress : undefined;
  const [, forwarder, ...forwarderArgs] = egress?.forwarder ?? [];
  if (egress)
    args.push('--volume', `${egress.socket}:${EGRESS_SOCKET}`, '--volume', `${forwarder}:${forwarder}:ro`);
  args.push('--env', `PATH=${CONTAINER_PATH}`);
  for (const name of Object.keys(run.env)) if (name !== 'PATH') args.push('--env', name);
  args.push(image);
  if (egress) args.push('/bin/sh', '-c', IMAGE_PERL, 'factoryd-egress', forwarder!, ...forwarderArgs);
  args.push('/bin/sh', '-c', TMP_WRITABLE + run.command);
  return args;
}

/**
 * Docker's tmpfs over /tmp keeps the mode of the image's own /tmp: an image that made it root's
 * alone leaves the run without one, and agent CLIs then fail in ways that name nothing (Claude
 * Code exits 0 having said nothing). The run's output says why first.
 */
const TMP_WRITABLE =
  '[ -w /tmp ] || echo "factoryd: /tmp is not writable by the run\'s user in this image; agent CLIs write ' +
  'their temporary files there. Give the image\'s /tmp mode 1777, as Debian, Ubuntu and Alpine images have it" >&2; ';

/**
 * The image's perl runs the forwarder. An image without one runs the command as it is, with no way
 * out (the `none` network), and the run's output says so and what to do.
 */
const IMAGE_PERL =
  'command -v perl >/dev/null 2>&1 && exec perl "$@"; echo "factoryd: this image has no perl, which the egress ' +
  'forwarder needs: the run has no network at all. Add perl to the image (Debian and Ubuntu images have it), ' +
  'or give the environment network: bridge" >&2; while [ "$1" != -- ]; do shift; done; shift; exec "$@"';

function networkProblem(network: string): string | undefined {
  if ((DOCKER_NETWORKS as readonly string[]).includes(network)) return undefined;
  return `network must be one of ${DOCKER_NETWORKS.join(', ')}, got "${network.slice(0, 100)}"`;
}

/** The read-only paths every container gets: Node.js at its own path and the package's harnesses. */
export function harnessPaths(packageRoot: string): string[] {
  return [
    process.execPath,
    // The copies harness uids run from when the checkout keeps them out (harness-programs.ts).
    ...[...['dist', 'examples'].map((d) => join(packageRoot, d)), SHARED_RUNTIME_DIR].filter((p) =>
      existsSync(p),
    ),
  ];
}

/** The CLI, or undefined when it is not installed. */
export function dockerCli(): string | undefined {
  return ['/usr/bin/docker', '/usr/local/bin/docker', '/bin/docker'].find((p) => existsSync(p));
}

/** Undefined when the Engine answers; else why not, in one line. */
export function engineProblem(docker: string | undefined): string | undefined {
  if (!docker) return 'the docker CLI is not installed (Debian: apt-get install docker.io)';
  const out = spawnSync(docker, ['version', '--format', '{{.Server.Version}}'], {
    encoding: 'utf8',
    timeout: 15_000,
  });
  if (out.status === 0 && out.stdout.trim()) return undefined;
  const why = (out.stderr || out.error?.message || `exit ${out.status ?? out.signal}`).trim().split('\n');
  return `the Docker Engine does not answer (docker version: ${why.find(Boolean)})`;
}

/** Runs the CLI; resolves with its exit status and output, never rejects. */
export function docker(
  cli: string,
  args: string[],
  timeoutMs = 30_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', (err) => resolve({ code: null, stdout, stderr: err.message }));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Images this process saw on the machine, and pulls under way (one per image). */
const present = new Set<string>();
const pulls = new Map<string, Promise<string | undefined>>();
const PULL_TIMEOUT_MS = 15 * 60_000;

/**
 * Undefined once `image` is on the machine (pulled once if it was not, when a registry answers);
 * else a message that names the image and what went wrong.
 */
export async function ensureImage(cli: string, image: string): Promise<string | undefined> {
  if (present.has(image)) return undefined;
  const local = await docker(cli, ['image', 'inspect', '--format', '{{.Id}}', image]);
  if (local.code === 0) {
    present.add(image);
    return undefined;
  }
  let pull = pulls.get(image);
  if (!pull) {
    pull = docker(cli, ['pull', '--quiet', image], PULL_TIMEOUT_MS).then((r) => {
      pulls.delete(image);
      if (r.code === 0) {
        present.add(image);
        return undefined;
      }
      const why = (r.stderr.trim().split('\n').at(-1) ?? '').replace(/^Error response from daemon: /, '');
      return `the image ${image} is not on this machine and could not be pulled: ${why || `exit ${r.code}`}`;
    });
    pulls.set(image, pull);
  }
  return pull;
}

/** SIGTERM to the harness (through Docker's init), or SIGKILL to everything in the container. */
export function signalContainer(cli: string, name: string, sig: 'SIGTERM' | 'SIGKILL'): void {
  void docker(cli, ['kill', '--signal', sig, name]);
}

/** Removes the container, running or not (nothing is left of the run's processes). */
export function removeContainer(cli: string, name: string): Promise<unknown> {
  return docker(cli, ['rm', '--force', '--volumes', name]);
}

/** The same, waited for: for a launcher about to exit. */
export function removeContainersSync(cli: string, names: string[]): void {
  if (names.length)
    spawnSync(cli, ['rm', '--force', '--volumes', ...names], { stdio: 'ignore', timeout: 30_000 });
}

/** A kept container's name ends so: the sweep judges it by its age, not by its launcher. */
const KEPT = '-failed';

/**
 * A failed run's container, stopped and kept `seconds` for a look (`docker logs`, `docker inspect`:
 * its exit code, OOMKilled), then removed by this process, or by the sweep of the next worker on
 * the machine if this one is gone.
 */
export function keepFailed(cli: string, name: string, seconds: number): void {
  void docker(cli, ['kill', name])
    .then(() => docker(cli, ['rename', name, name + KEPT]))
    .then((r) => {
      const kept = r.code === 0 ? name + KEPT : name;
      setTimeout(() => void removeContainer(cli, kept), seconds * 1000).unref();
    });
}

/**
 * Removes this machine's factoryd containers whose launcher is gone (a worker and its launcher
 * killed together, or a machine restarted), running or not, and kept ones whose time is over.
 * Returns their names.
 */
export async function sweepContainers(cli: string, now = Date.now()): Promise<string[]> {
  const list = await docker(cli, [
    'ps',
    '--all',
    '--filter',
    `label=${OWNER_LABEL}`,
    '--format',
    `{{.Names}}\t{{.Label "${OWNER_LABEL}"}}\t{{.Label "${KEEP_LABEL}"}}\t{{.State}}`,
  ]);
  if (list.code !== 0) return [];
  const host = hostname();
  const doomed: string[] = [];
  const exited: Array<{ name: string; keep: number }> = [];
  for (const line of list.stdout.split('\n').filter(Boolean)) {
    const [name = '', owner = '', keep = '0', state = ''] = line.split('\t');
    const [ownerHost, pid] = owner.split('/');
    if (ownerHost !== host) continue; // another machine's, on a shared Engine: its pids mean nothing here
    if (name.endsWith(KEPT) && state === 'exited') exited.push({ name, keep: Number(keep) || 0 });
    else if (launcherIdentity(Number(pid)) !== owner) doomed.push(name);
  }
  if (exited.length) {
    const finished = await docker(cli, [
      'inspect',
      '--format',
      '{{.State.FinishedAt}}',
      ...exited.map((e) => e.name),
    ]);
    const times = finished.stdout.split('\n');
    exited.forEach((e, i) => {
      const at = Date.parse(times[i] ?? '');
      if (!(at > 0) || at + e.keep * 1000 <= now) doomed.push(e.name);
    });
  }
  if (doomed.length) await docker(cli, ['rm', '--force', '--volumes', ...doomed]);
  return doomed;
}
