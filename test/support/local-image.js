// A Docker image made from this machine's own files, for the Docker backend's tests and benchmark
// (no registry is needed, none may be reachable): the shell and a few tools of the host, the whole
// of glibc's shared libraries as every glibc image has them (an agent CLI's native binary links
// librt, which neither the tools nor Node.js need), the C++ libraries Node.js links against, perl and its base modules (the egress forwarder's:
// Debian and Ubuntu images have them), `nobody` in /etc/passwd. No Node.js: the backend binds the
// worker's own in. Plain JS: bench/ imports it too.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const TOOLS = [
  '/bin/dash',
  '/bin/cat',
  '/bin/ls',
  '/bin/sleep',
  '/usr/bin/id',
  '/bin/rm',
  '/bin/mkdir',
  '/usr/bin/env',
  '/usr/bin/perl',
];

/** Every file of the folders on perl's module path that hold its base modules (perl-base's). */
function perlBase() {
  const inc = execFileSync('/usr/bin/perl', ['-e', 'print join "\\n", grep { -d } @INC'], {
    encoding: 'utf8',
  });
  return inc
    .split('\n')
    .filter((dir) => dir.endsWith('perl-base'))
    .flatMap((dir) =>
      readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => join(e.parentPath ?? e.path, e.name)),
    );
}

/** The files this module writes into the image itself (below): a change here makes a new tag. */
const LAYOUT = '/tmp 1777; /etc/passwd root, nobody; /etc/image-marker; /bin/sh -> dash';

/** glibc's shared libraries (Debian's libc6), or none where dpkg does not know it (ldd's then). */
function glibc() {
  const listed = spawnSync('dpkg', ['-L', 'libc6'], { encoding: 'utf8' });
  if (listed.status !== 0) return [];
  return listed.stdout.split('\n').filter((f) => /^\/lib\/[^/]+-linux-gnu\/[^/]+\.so[.\d]*$/.test(f));
}

/** Why the Docker tests cannot run here, or undefined when they can (root, and the Engine answers). */
export function dockerUnavailable() {
  if (process.getuid?.() !== 0) return 'not root (the Docker backend tests start containers as root)';
  const out = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], {
    encoding: 'utf8',
    timeout: 15_000,
  });
  if (out.status !== 0)
    return `no Docker Engine answers (docker info: ${(out.stderr || out.error?.message || '').trim().split('\n').at(-1)})`;
  return undefined;
}

/** Imports the image (once per content: its tag is a hash of the files) and returns its tag. */
export function localImage() {
  const libs = new Set();
  for (const bin of [...TOOLS, process.execPath]) {
    const ldd = execFileSync('ldd', [bin], { encoding: 'utf8' });
    for (const m of ldd.matchAll(/(\/\S+\.so[^\s]*)/g)) libs.add(m[1]);
  }
  const files = [...new Set([...TOOLS, ...libs, ...glibc(), ...perlBase()])].sort();
  const hash = createHash('sha256');
  // What is made here rather than copied is part of the tag too: change LAYOUT with it.
  hash.update(LAYOUT);
  for (const f of files) hash.update(f).update(readFileSync(f));
  const tag = `factoryd-test-glibc:${hash.digest('hex').slice(0, 12)}`;
  if (spawnSync('docker', ['image', 'inspect', tag], { stdio: 'ignore' }).status === 0) return tag;
  const root = mkdtempSync(join(tmpdir(), 'factoryd-image-'));
  try {
    for (const f of files) {
      mkdirSync(join(root, dirname(f)), { recursive: true });
      copyFileSync(f, join(root, f));
    }
    symlinkSync('dash', join(root, 'bin/sh'));
    for (const d of ['tmp', 'etc', 'run', 'workspace']) mkdirSync(join(root, d), { recursive: true });
    // As in every image: anyone may write /tmp (Docker copies its mode onto the tmpfs over it).
    chmodSync(join(root, 'tmp'), 0o1777);
    writeFileSync(
      join(root, 'etc/passwd'),
      'root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/sh\n',
    );
    writeFileSync(join(root, 'etc/image-marker'), 'inside the test image\n');
    const tar = spawnSync('tar', ['-C', root, '-c', '.'], { maxBuffer: 1 << 30 });
    const imported = spawnSync('docker', ['import', '-', tag], { input: tar.stdout, encoding: 'utf8' });
    if (imported.status !== 0) throw new Error(`docker import: ${imported.stderr}`);
    return tag;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** `base` with its /tmp made root's alone (0755), as a careless image has it; made once. */
export function imageWithRootOnlyTmp(base) {
  const tag = `${base}-root-tmp`;
  if (spawnSync('docker', ['image', 'inspect', tag], { stdio: 'ignore' }).status === 0) return tag;
  const name = `factoryd-test-root-tmp-${process.pid}`;
  execFileSync('docker', [
    'run',
    '--name',
    name,
    base,
    '/usr/bin/perl',
    '-e',
    'chmod 0755, "/tmp" or die $!',
  ]);
  try {
    execFileSync('docker', ['commit', name, tag], { stdio: 'ignore' });
  } finally {
    spawnSync('docker', ['rm', '-f', name], { stdio: 'ignore' });
  }
  return tag;
}

/** Names of containers (running or not) whose name contains `part`. */
export function containersNamed(part) {
  const out = execFileSync('docker', ['ps', '--all', '--filter', `name=${part}`, '--format', '{{.Names}}'], {
    encoding: 'utf8',
  });
  return out.split('\n').filter(Boolean);
}
