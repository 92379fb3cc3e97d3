import { spawnSync } from 'node:child_process';

/** Why bwrap cannot run a sandbox here (undefined: it can). */
export function bwrapMissing(): string | undefined {
  const probe = spawnSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--proc', '/proc', 'true'], {
    encoding: 'utf8',
  });
  if (probe.error) return `bwrap is not installed (${probe.error.message})`;
  return probe.status === 0 ? undefined : `bwrap cannot make namespaces here: ${probe.stderr.trim()}`;
}

/**
 * Why the service's own workers run no harness of a service with two teams here (undefined: they
 * do): nothing confines harnesses — not root (no `user` mode) and no working bwrap.
 */
export function unconfinedHere(): string | undefined {
  if (process.getuid?.() === 0) return undefined;
  const bwrap = bwrapMissing();
  return bwrap && `not root, and ${bwrap}`;
}
