import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { simpleGit } from 'simple-git';
import { ALLOWED_TRANSPORTS } from './repository-policy.js';

/** A blob of the tree at a commit. */
export interface TreeEntry {
  sha: string;
  content: string;
}

/** Where a factory's definition comes from. */
export interface FactorySourceRef {
  id: string;
  repoUrl: string;
  branch: string;
}

/**
 * Git itself refuses every transport but https, ssh and git (no `file://`, `ext::` or remote helper),
 * whatever a row or a repository's config says (docs/security.md, "Factory registration"). Command-line
 * config outranks every config file; simple-git insists on `allowUnsafeProtocolOverride` to pass it.
 */
const ONLY_ALLOWED_TRANSPORTS = {
  config: ['protocol.allow=never', ...ALLOWED_TRANSPORTS.map((t) => `protocol.${t}.allow=always`)],
  unsafe: { allowUnsafeProtocolOverride: true },
};

/**
 * A factory repository read through git alone, at a commit (ls-tree, cat-file), never from a working
 * copy. A remote repository's production branch is fetched into a bare mirror under DATA_DIR; a local
 * one is read in place — a commit's objects never change, and a local `git fetch` (upload-pack,
 * pack-objects) was most of a one-file apply's time. So an unchanged local head costs one rev-parse.
 */
export class GitSource {
  constructor(private readonly dataDir: string) {}

  /** A repository on this machine (a path), as opposed to a URL git fetches from. */
  static isLocal(repoUrl: string): boolean {
    return !/^[a-z][a-z0-9+.-]*:\/\//i.test(repoUrl) && !/^[^/]+@[^/]+:/.test(repoUrl) && existsSync(repoUrl);
  }

  /** The git directory of a local repository (its `.git`, or itself when bare). */
  static async gitDir(path: string): Promise<string> {
    const dir = (await simpleGit(path).raw(['rev-parse', '--absolute-git-dir'])).trim();
    return isAbsolute(dir) ? dir : resolve(path, dir);
  }

  /**
   * The head of the production branch, made readable by `readTree`: a local repository's as it is, a
   * remote one's fetched into the mirror.
   */
  async head(f: FactorySourceRef): Promise<string> {
    if (GitSource.isLocal(f.repoUrl)) return revParse(f.repoUrl, f.branch);
    const mirror = this.mirrorOf(f);
    if (!existsSync(join(mirror, 'HEAD'))) {
      mkdirSync(mirror, { recursive: true });
      await simpleGit(mirror).raw(['init', '--bare', '--quiet']);
    }
    try {
      await simpleGit(mirror, ONLY_ALLOWED_TRANSPORTS).raw([
        'fetch',
        '--quiet',
        '--force',
        '--no-tags',
        f.repoUrl,
        `+refs/heads/${f.branch}:refs/heads/${f.branch}`,
      ]);
    } catch (err) {
      throw new Error(`cannot fetch branch ${f.branch} of ${displayUrl(f.repoUrl)}: ${firstLine(err)}`, {
        cause: err,
      });
    }
    return revParse(mirror, f.branch);
  }

  /**
   * The files at `commit` (as returned by `head`) whose paths `wanted` accepts. Blobs already in
   * `cache` (by blob id) are not read again, so an apply after a one-file change reads one file.
   */
  async readTree(
    f: FactorySourceRef,
    commit: string,
    wanted: (path: string) => boolean,
    cache?: Map<string, string>,
  ): Promise<Map<string, TreeEntry>> {
    const repo = GitSource.isLocal(f.repoUrl) ? f.repoUrl : this.mirrorOf(f);
    const listing = await simpleGit(repo).raw(['ls-tree', '-r', '-z', '--full-tree', commit]);
    const entries: Array<{ path: string; sha: string }> = [];
    for (const line of listing.split('\0')) {
      if (!line) continue;
      const tab = line.indexOf('\t');
      const [, type, sha] = line.slice(0, tab).split(' ');
      const path = line.slice(tab + 1);
      if (type === 'blob' && wanted(path)) entries.push({ path, sha });
    }
    const missing = [...new Set(entries.filter((e) => !cache?.has(e.sha)).map((e) => e.sha))];
    const read = missing.length ? await catFileBatch(repo, missing) : new Map<string, string>();
    const tree = new Map<string, TreeEntry>();
    for (const e of entries) {
      const content = read.get(e.sha) ?? cache?.get(e.sha) ?? '';
      cache?.set(e.sha, content);
      tree.set(e.path, { sha: e.sha, content });
    }
    return tree;
  }

  mirrorOf(f: FactorySourceRef): string {
    return join(this.dataDir, 'mirrors', `${f.id}.git`);
  }
}

async function revParse(repo: string, branch: string): Promise<string> {
  try {
    return (
      await simpleGit(repo).raw(['rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`])
    ).trim();
  } catch (err) {
    throw new Error(`branch ${branch} not found in ${displayUrl(repo)}: ${firstLine(err)}`, { cause: err });
  }
}

/** `git cat-file --batch`: many blobs through one process. */
export function catFileBatch(gitDir: string, shas: string[]): Promise<Map<string, string>> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn('git', ['cat-file', '--batch'], { cwd: gitDir, stdio: ['pipe', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`git cat-file failed: ${stderr.trim()}`));
      const out = Buffer.concat(chunks);
      const blobs = new Map<string, string>();
      let at = 0;
      while (at < out.length) {
        const nl = out.indexOf(10, at);
        const [sha, type, size] = out.subarray(at, nl).toString().split(' ');
        if (type === 'missing') return reject(new Error(`git object ${sha} is missing`));
        const n = Number(size);
        blobs.set(sha, out.subarray(nl + 1, nl + 1 + n).toString('utf8'));
        at = nl + 1 + n + 1;
      }
      resolvePromise(blobs);
    });
    child.stdin.end(shas.join('\n') + '\n');
  });
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
