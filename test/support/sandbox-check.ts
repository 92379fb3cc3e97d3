import { spawnSync } from 'node:child_process';

let probed: { missing: string | undefined } | undefined;

/** Why bwrap cannot run a sandbox here (undefined: it can); probed once per process. */
export function bwrapMissing(): string | undefined {
  probed ??= { missing: probeBwrap() };
  return probed.missing;
}

function probeBwrap(): string | undefined {
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

/**
 * Why a test whose service has its own workers run the harnesses of two teams cannot run here
 * (undefined: it can): they take no run once the service holds two teams and nothing confines
 * harnesses (docs/security.md, "none"); the runs stay queued.
 */
export const twoTeamsRefused: string | undefined = (() => {
  const why = unconfinedHere();
  return why && `${why}: the service's own workers run no harness once it holds two teams`;
})();

/** What such a test's name ends with where it is skipped. */
export const twoTeamsNote = twoTeamsRefused ? ` (skipped: ${twoTeamsRefused})` : '';
