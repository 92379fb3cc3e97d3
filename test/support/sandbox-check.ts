import { spawnSync } from 'node:child_process';

/** Why bwrap cannot run a sandbox here (undefined: it can). */
export function bwrapMissing(): string | undefined {
  const probe = spawnSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--proc', '/proc', 'true'], {
    encoding: 'utf8',
  });
  if (probe.error) return `bwrap is not installed (${probe.error.message})`;
  return probe.status === 0 ? undefined : `bwrap cannot make namespaces here: ${probe.stderr.trim()}`;
}
