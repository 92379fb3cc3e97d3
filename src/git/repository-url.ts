/**
 * Which git URLs factoryd fetches, for a factory's repository and an environment's alike: the
 * transports allowed, and how a URL is told from a local path. Pure: no I/O.
 */

/**
 * The transports a factory's repository may be fetched over. Git is told the same (GitSource), so a
 * row that bypassed this check still cannot reach `file://`, `ext::` or a remote helper.
 */
export const ALLOWED_TRANSPORTS = ['https', 'ssh', 'git'] as const;

/** A repository factoryd may not use: the message names the rule broken and the fix. */
export class RepositoryRefused extends Error {}

export const HOW_TO_GIVE = 'a URL (https://, ssh://, git:// or user@host:path) or a local repository';

/**
 * Whether git would fetch `repoUrl` from another machine, over an allowed transport; throws for
 * every other transport (`file://`, `http://`, `ext::`, remote helpers). False: a local path.
 */
export function isRemote(repoUrl: string): boolean {
  const helper = /^([A-Za-z][A-Za-z0-9+.-]*)::/.exec(repoUrl);
  if (helper)
    throw new RepositoryRefused(
      `the git transport "${helper[1]}::" is refused (remote helpers run programs on this machine; ext:: runs any command): give ${HOW_TO_GIVE}`,
    );
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(repoUrl)?.[1].toLowerCase();
  if (scheme !== undefined) {
    if (scheme === 'file')
      throw new RepositoryRefused(
        `file:// URLs are refused: give the folder as a local path (allowed under FACTORY_REPO_ROOTS)`,
      );
    if (!(ALLOWED_TRANSPORTS as readonly string[]).includes(scheme))
      throw new RepositoryRefused(
        `the transport ${scheme}:// is refused: factoryd fetches over ${ALLOWED_TRANSPORTS.map((t) => `${t}://`).join(', ')} and user@host:path only`,
      );
    let host: string;
    try {
      host = new URL(repoUrl).hostname;
    } catch {
      throw new RepositoryRefused(`the ${scheme}:// URL does not parse: check the repository URL`);
    }
    if (!host || host.startsWith('-'))
      throw new RepositoryRefused(`the repository URL has no valid host: check it`);
    return true;
  }
  // git's own rule: a colon before the first slash makes `[user@]host:path`, fetched over ssh.
  const scp = /^(?:[^@/:\s]+@)?([^@/:\s]+):/.exec(repoUrl);
  if (scp) {
    if (scp[1].startsWith('-'))
      throw new RepositoryRefused(`the host of ${repoUrl} starts with "-": check the repository URL`);
    return true;
  }
  return false;
}
