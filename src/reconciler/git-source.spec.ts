import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitRunner } from '../git/git-runner.js';
import { GitSource } from './git-source.js';

const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], {
    cwd: dir,
    encoding: 'utf8',
  }).trim();

/** A repository with one commit of `file` holding `text`; its git directory. */
function repository(root: string, name: string, text: string): string {
  const dir = join(root, name);
  mkdirSync(dir);
  git(dir, 'init', '--quiet', '--initial-branch=main');
  writeFileSync(join(dir, 'file'), text);
  git(dir, 'add', '-A');
  git(dir, 'commit', '--quiet', '-m', text);
  return join(dir, '.git');
}

/**
 * Issue #32, 2: git run in a git directory with no GIT_DIR looks for a `.git` inside it first, so a
 * `.git` file there (`gitdir: <acme's .git>`) read acme's head. The policy refuses such a file; the
 * reader names the git directory all the same (GIT_DIR), so what it reads is the folder it was given.
 */
describe('GitSource reads a local repository from the git directory it is given', () => {
  const root = mkdtempSync(join(tmpdir(), 'factoryd-git-source-'));
  const source = new GitSource(join(root, 'data'), new GitRunner({ gitTimeoutSeconds: 30 }));
  let acme: string;
  let evil: string;

  beforeAll(() => {
    acme = repository(root, 'acme', 'acme secret');
    evil = repository(root, 'evil', 'evil own');
    writeFileSync(join(evil, '.git'), `gitdir: ${acme}\n`);
    // What git makes of it when it looks for the repository itself.
    expect(git(evil, 'log', '-1', '--format=%s')).toBe('acme secret');
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('with a .git file inside it: its own head and files, never the ones the file names', async () => {
    const f = { id: 'f', repoUrl: evil, branch: 'main' };
    const head = await source.head(f);
    expect(head).toBe(git(evil.replace(/\.git$/, ''), 'rev-parse', 'HEAD'));
    const blobs = await source.listTree(f, head, () => true);
    expect(blobs.map((b) => b.path)).toEqual(['file']);
    const contents = await source.readBlobs(f, [blobs[0]!.sha]);
    expect([...contents.values()]).toEqual(['evil own']);
  });
});
