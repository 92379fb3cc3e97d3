/**
 * Branches an agent pushed during a turn, as artifacts (docs/harnesses.md, "Branches the agent
 * pushed"). Shared by every built-in harness: the runner notes the workspace repositories'
 * remote-tracking refs (`refs/remotes/<remote>/<branch>`) before a turn and compares after it. A
 * `git push` to a named remote moves that remote's tracking ref; so does a `git fetch`, which the
 * ref's reflog tells apart ("update by push"). Node built-ins and the git on PATH only: it runs in
 * the harness's sandbox as the harness's user.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ProtocolEvent } from './adapter-runner.js';

/** Repositories are looked for this deep under the workspace (an environment's `path` is a folder or two). */
const MAX_DEPTH = 3;
/** …and in at most this many folders, so a workspace full of files costs the turn little. */
const MAX_FOLDERS = 2000;
const GIT_TIMEOUT_MS = 10_000;

/** Each repository's remote-tracking refs: repository folder → ref name → commit. */
export type RemoteRefs = Map<string, Map<string, string>>;

/** The git repositories in the workspace (its top and folders below, not inside dot-folders or node_modules). */
export function workspaceRepositories(workspace: string): string[] {
  const found: string[] = [];
  let visited = 0;
  const walk = (dir: string, depth: number) => {
    if (visited++ > MAX_FOLDERS) return;
    if (existsSync(join(dir, '.git'))) found.push(dir);
    if (depth >= MAX_DEPTH) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries)
      if (e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
        walk(join(dir, e.name), depth + 1);
  };
  walk(resolve(workspace), 0);
  return found;
}

function git(repo: string, args: string[]): string | undefined {
  try {
    return execFileSync('git', args, {
      cwd: repo,
      encoding: 'utf8',
      timeout: GIT_TIMEOUT_MS,
      stdio: ['ignore', 'pipe', 'ignore'],
      // Nothing asks for a password or an editor here: this only reads refs.
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
    });
  } catch {
    return undefined; // no git, or not a repository git will read: nothing to report
  }
}

function refsOf(repo: string): Map<string, string> {
  const out = new Map<string, string>();
  const text = git(repo, ['for-each-ref', '--format=%(objectname) %(refname)', 'refs/remotes']) ?? '';
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    const ref = line.slice(space + 1);
    if (space > 0 && !ref.endsWith('/HEAD')) out.set(ref, line.slice(0, space));
  }
  return out;
}

export function remoteRefs(workspace: string): RemoteRefs {
  return new Map(workspaceRepositories(workspace).map((repo) => [repo, refsOf(repo)]));
}

/**
 * A remote's URL as the run may show it: no user name or password (an https token stays out of the
 * run's artifacts), a local path as a `file://` URL.
 */
export function displayUrl(url: string, repo: string): string {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      const u = new URL(url);
      u.username = '';
      u.password = '';
      return u.toString();
    } catch {
      return url.replace(/\/\/[^/@]*@/, '//');
    }
  }
  if (/^[^/]+@[^/:]+:/.test(url)) return url; // user@host:path (scp-like): the user is no secret
  return pathToFileURL(resolve(repo, url)).toString();
}

/**
 * The branches pushed since `before`: one EXTERNAL_REFERENCE artifact each (the clients' ArtifactItem
 * has no branch type; PULL_REQUEST needs a pull request's URL). `url` is `<remote URL>#<branch>` (the
 * form npm and others use for "this repository at this branch"), `title` the branch, `metadata`
 * the branch, remote, commit and the repository's folder in the workspace.
 */
export function pushedBranches(workspace: string, before: RemoteRefs): ProtocolEvent[] {
  const out: ProtocolEvent[] = [];
  for (const repo of workspaceRepositories(workspace)) {
    const was = before.get(repo) ?? new Map<string, string>();
    const changed = [...refsOf(repo)].filter(([ref, commit]) => was.get(ref) !== commit);
    if (!changed.length) continue;
    const remotes = (git(repo, ['remote']) ?? '').split('\n').filter(Boolean);
    for (const [ref, commit] of changed) {
      // A fetch moves tracking refs too: only a push's update counts (no reflog: counted).
      const why = git(repo, ['reflog', 'show', '-n1', '--format=%gs', ref, '--'])?.trim();
      if (why && !why.startsWith('update by push')) continue;
      const name = ref.slice('refs/remotes/'.length);
      const remote = remotes.filter((r) => name.startsWith(`${r}/`)).sort((a, b) => b.length - a.length)[0];
      if (!remote) continue;
      const branch = name.slice(remote.length + 1);
      const remoteUrl = git(repo, ['remote', 'get-url', remote])?.trim();
      if (!remoteUrl) continue;
      const url = displayUrl(remoteUrl, repo);
      out.push({
        type: 'artifact',
        artifact_type: 'EXTERNAL_REFERENCE',
        reference_type: 'git_branch',
        url: `${url}#${branch}`,
        title: branch,
        metadata: {
          branch,
          remote,
          remote_url: url,
          commit,
          repository: relative(resolve(workspace), repo) || '.',
        },
      });
    }
  }
  return out;
}
