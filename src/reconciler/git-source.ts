import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GitStopped, GitTimedOut, type GitCredentials, type GitRunner } from '../git/git-runner.js';

/** A blob of the tree at a commit, as listed: its size is known before it is read. */
export interface ListedBlob {
  path: string;
  sha: string;
  size: number;
  /** Mode 120000: a symbolic link, whose blob is its target's path. */
  link?: boolean;
}

/** Where a factory's definition comes from. */
export interface FactorySourceRef {
  id: string;
  repoUrl: string;
  branch: string;
  /** What the remote is told when it asks (from the team secret named by the factory). */
  credentials?: GitCredentials;
}

/**
 * A factory repository read through git alone, at a commit (ls-tree, cat-file), never from a working
 * copy. A remote repository's production branch is fetched into a bare mirror under DATA_DIR; a local
 * one is read in place — a commit's objects never change, and a local `git fetch` (upload-pack,
 * pack-objects) was most of a one-file apply's time. So an unchanged local head costs one rev-parse.
 */
export class GitSource {
  constructor(
    private readonly dataDir: string,
    private readonly git: GitRunner,
  ) {}

  /** A repository on this machine (a path), as opposed to a URL git fetches from. */
  static isLocal(repoUrl: string): boolean {
    return !/^[a-z][a-z0-9+.-]*:\/\//i.test(repoUrl) && !/^[^/]+@[^/]+:/.test(repoUrl) && existsSync(repoUrl);
  }

  /**
   * The head of the production branch, made readable by `listTree`: a local repository's as it is, a
   * remote one's fetched into the mirror.
   */
  async head(f: FactorySourceRef): Promise<string> {
    if (GitSource.isLocal(f.repoUrl)) return revParse(this.git, f.repoUrl, f.branch);
    const mirror = this.mirrorOf(f);
    if (!existsSync(join(mirror, 'HEAD'))) {
      mkdirSync(mirror, { recursive: true });
      await this.git.run(['init', '--bare', '--quiet'], mirror);
    }
    try {
      await this.git.run(
        [
          'fetch',
          '--quiet',
          '--force',
          '--no-tags',
          f.repoUrl,
          `+refs/heads/${f.branch}:refs/heads/${f.branch}`,
        ],
        mirror,
        undefined,
        inRepository(mirror),
        f.credentials && { ...f.credentials, host: hostOf(f.repoUrl) },
      );
    } catch (err) {
      if (err instanceof GitStopped) throw err;
      if (err instanceof GitTimedOut)
        throw new Error(
          `git fetch of branch ${f.branch} from ${displayUrl(f.repoUrl)} timed out after ${err.seconds} s (GIT_TIMEOUT_SECONDS); check that the remote answers from this host`,
          { cause: err },
        );
      throw new Error(`cannot fetch branch ${f.branch} of ${displayUrl(f.repoUrl)}: ${firstLine(err)}`, {
        cause: err,
      });
    }
    return revParse(this.git, mirror, f.branch);
  }

  /**
   * The blobs at `commit` (as returned by `head`) whose paths `wanted` accepts, with their sizes
   * (`ls-tree -l`): what may be read is decided before anything is.
   */
  async listTree(
    f: FactorySourceRef,
    commit: string,
    wanted: (path: string) => boolean,
  ): Promise<ListedBlob[]> {
    const repo = this.repoOf(f);
    const listing = (
      await this.git.run(
        ['ls-tree', '-r', '-l', '-z', '--full-tree', commit],
        repo,
        undefined,
        inRepository(repo),
      )
    ).toString('utf8');
    const blobs: ListedBlob[] = [];
    for (const line of listing.split('\0')) {
      if (!line) continue;
      const tab = line.indexOf('\t');
      const [mode, type, sha, size] = line.slice(0, tab).split(/ +/);
      const path = line.slice(tab + 1);
      if (type === 'blob' && wanted(path))
        blobs.push({ path, sha, size: Number(size), ...(mode === '120000' && { link: true }) });
    }
    return blobs;
  }

  /** The contents of blobs (by id) of the factory's repository, through one `git cat-file --batch`. */
  readBlobs(f: FactorySourceRef, shas: string[]): Promise<Map<string, string>> {
    return shas.length ? catFileBatch(this.git, this.repoOf(f), shas) : Promise.resolve(new Map());
  }

  private repoOf(f: FactorySourceRef): string {
    return GitSource.isLocal(f.repoUrl) ? f.repoUrl : this.mirrorOf(f);
  }

  mirrorOf(f: FactorySourceRef): string {
    return join(this.dataDir, 'mirrors', `${f.id}.git`);
  }
}

async function revParse(git: GitRunner, repo: string, branch: string): Promise<string> {
  try {
    return (
      await git.run(
        ['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`],
        repo,
        undefined,
        inRepository(repo),
      )
    )
      .toString('utf8')
      .trim();
  } catch (err) {
    if (err instanceof GitStopped) throw err;
    throw new Error(`branch ${branch} not found in ${displayUrl(repo)}: ${firstLine(err)}`, { cause: err });
  }
}

/** `git cat-file --batch`: many blobs through one process. */
async function catFileBatch(git: GitRunner, gitDir: string, shas: string[]): Promise<Map<string, string>> {
  const out = await git.run(['cat-file', '--batch'], gitDir, shas.join('\n') + '\n', inRepository(gitDir));
  const blobs = new Map<string, string>();
  let at = 0;
  while (at < out.length) {
    const nl = out.indexOf(10, at);
    const [sha, type, size] = out.subarray(at, nl).toString().split(' ');
    if (type === 'missing') throw new Error(`git object ${sha} is missing`);
    const n = Number(size);
    blobs.set(sha, out.subarray(nl + 1, nl + 1 + n).toString('utf8'));
    at = nl + 1 + n + 1;
  }
  return blobs;
}

/**
 * git's environment for a call on the git directory `gitDir` (a local repository's, as the policy
 * checked it, or a mirror): named by GIT_DIR, so git never looks for the repository itself. Run
 * there without it, git would take a `.git` file or folder inside `gitDir` for the repository
 * (issue #32: `.git/.git` holding `gitdir: <acme's .git>` read acme's head).
 */
function inRepository(gitDir: string): Record<string, string> {
  return { GIT_DIR: gitDir };
}

function hostOf(repoUrl: string): string {
  try {
    return new URL(repoUrl).host;
  } catch {
    return '';
  }
}

/** Git's own messages may echo a clone URL with its credentials: strip them. */
function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err))
    .trim()
    .split('\n')[0]
    .replace(/(\/\/)[^/@\s]+@/g, '$1');
}

function displayUrl(repoUrl: string): string {
  return repoUrl.replace(/(\/\/)[^/@\s]+@/g, '$1');
}
