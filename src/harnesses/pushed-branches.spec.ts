import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { displayUrl, pushedBranches, remoteRefs } from './pushed-branches.js';

// Real git in a temporary workspace: a push counts, a fetch that moves the same refs does not.
const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.email=a@example.com', '-c', 'user.name=t', ...args], {
    cwd,
    stdio: 'pipe',
  });

describe('pushedBranches', () => {
  it('reports a pushed branch, and not one a fetch brought', () => {
    const ws = mkdtempSync(join(tmpdir(), 'pushed-'));
    dirs.push(ws);
    git(ws, 'init', '-q', '--bare', 'remote.git');
    git(ws, 'init', '-q', 'repo');
    const repo = join(ws, 'repo');
    git(repo, 'commit', '-q', '--allow-empty', '-m', 'one');
    git(repo, 'remote', 'add', 'origin', join(ws, 'remote.git'));
    // Someone else's branch on the remote, fetched during the turn: not the agent's push.
    git(ws, 'clone', '-q', 'remote.git', 'other');
    git(join(ws, 'other'), 'commit', '-q', '--allow-empty', '-m', 'theirs');
    git(join(ws, 'other'), 'push', '-q', 'origin', 'HEAD:refs/heads/theirs');
    const before = remoteRefs(ws);
    git(repo, 'push', '-q', 'origin', 'HEAD:refs/heads/mine');
    git(repo, 'fetch', '-q', 'origin');
    const found = pushedBranches(ws, before);
    expect(found.map((a) => a.title)).toEqual(['mine']);
    expect(found[0]).toMatchObject({
      artifact_type: 'EXTERNAL_REFERENCE',
      reference_type: 'git_branch',
      url: `file://${join(ws, 'remote.git')}#mine`,
      metadata: { branch: 'mine', remote: 'origin', repository: 'repo' },
    });
    // Nothing moved since: nothing to report.
    expect(pushedBranches(ws, remoteRefs(ws))).toEqual([]);
  });

  it("keeps a remote's user name and password out of the artifact", () => {
    expect(displayUrl('https://x-access-token:ghp_secret@github.com/acme/web.git', '/w')).toBe(
      'https://github.com/acme/web.git',
    );
    expect(displayUrl('git@github.com:acme/web.git', '/w')).toBe('git@github.com:acme/web.git');
    expect(displayUrl('../remote.git', '/w/repo')).toBe('file:///w/remote.git');
  });
});
