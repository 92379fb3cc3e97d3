import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { userInfo } from 'node:os';
import { Inject, Injectable } from '@nestjs/common';
import { Conflict, InvalidRequest } from '../common/problem.js';
import { CONFIG, type Config } from '../config/config.js';
import { GitRunner } from '../git/git-runner.js';
import { managedRepositoryPath } from '../reconciler/repository-policy.js';

/** A git call in a repository, its stdout as text. */
type GitText = (dir: string, ...args: string[]) => Promise<string>;

/** Who a commit is by: the API key's principal (or, for the CLI, the user at the terminal). */
export interface Author {
  name: string;
  email: string;
}

/** A commit made on top of `previous` (undefined: the first), not yet on the branch. */
export interface Candidate {
  previous: string | undefined;
  commit: string;
}

/** A file to write (`content`) or to remove (`null`), by repository path. */
export type FileChanges = Record<string, string | null>;

/** The committer of every managed commit; the author is the caller. */
const COMMITTER = ['-c', 'user.name=factoryd', '-c', 'user.email=factoryd@localhost'];
/** A person's git configuration must not sign, run hooks or rewrite line ends in factoryd's repositories. */
const ISOLATED = [
  '-c',
  'commit.gpgsign=false',
  '-c',
  'core.hooksPath=/dev/null',
  '-c',
  'core.autocrlf=false',
];

/**
 * The git repositories factoryd owns for managed factories, under
 * `DATA_DIR/factories/teams/<team>/<factory>`: a working copy on the production branch that only
 * factoryd writes. Every change is one commit authored by the caller.
 */
@Injectable()
export class ManagedRepositories {
  constructor(
    @Inject(CONFIG) private readonly config: Pick<Config, 'dataDir'>,
    @Inject(GitRunner) private readonly runner: GitRunner,
  ) {}

  pathFor(team: string, factory: string): string {
    return managedRepositoryPath(this.config.dataDir, team, factory);
  }

  /** A new repository at `dir` (which must not exist or be empty) whose first commit holds `files`. */
  async init(
    dir: string,
    branch: string,
    files: FileChanges,
    author: Author,
    message: string,
  ): Promise<string> {
    if (existsSync(dir) && readdirSync(dir).length > 0)
      throw new Error(`${dir} exists and is not empty; move it away or choose another factory name`);
    mkdirSync(dir, { recursive: true });
    await this.git(dir, 'init', '--quiet', `--initial-branch=${branch}`);
    await this.nameTheLocalUser(dir);
    const first = (await this.candidate(dir, branch, files, author, message, false))!;
    await this.advance(dir, branch, first);
    return first.commit;
  }

  /**
   * People commit in a managed repository too (the README's walkthrough does). Where git knows no
   * name for the machine's user (no `user.email` anywhere, and none it can make up: a host without a
   * domain, or `user.useConfigOnly`), their first `git commit` there would fail, so the repository
   * gets one of its own: the login name, `<login>@localhost`. A configured identity is left alone.
   */
  private async nameTheLocalUser(dir: string): Promise<void> {
    const known = await this.runner.run(['var', 'GIT_AUTHOR_IDENT'], dir).then(
      () => true,
      () => false,
    );
    if (known) return;
    const login = loginName();
    await this.git(dir, 'config', 'user.name', login);
    await this.git(dir, 'config', 'user.email', `${login}@localhost`);
  }

  /** The content of `path` at the branch head (undefined when there is no such file). */
  async read(dir: string, branch: string, path: string): Promise<string | undefined> {
    const head = await this.clean(dir, branch);
    const sha = await regularFileAt(this.gitText, dir, path, head);
    return sha ? this.git(dir, 'cat-file', 'blob', sha) : undefined;
  }

  /**
   * A commit by `author` of `files` on top of the branch head, which does not move: the branch takes
   * it (`advance`) only once it is live, so a change that never got confirmed is never on the branch
   * for a later reconcile to apply. Without `allowEmpty`, a change that changes nothing makes no
   * commit (undefined). Returns the commit and the head it is on.
   *
   * A symlink committed there (`webhooks/x.yaml -> /etc/…`, or a linked folder) must not redirect a
   * write outside the repository: a path with a link or any other non-regular file on it at the head
   * is refused (409), and content goes into git's index (hash-object, update-index), never through
   * the working tree. Git itself then brings the working copy to the new head (it replaces links on
   * disk, never follows them).
   */
  async candidate(
    dir: string,
    branch: string,
    files: FileChanges,
    author: Author,
    message: string,
    allowEmpty: boolean,
  ): Promise<Candidate | undefined> {
    const previous = await this.clean(dir, branch);
    for (const [path, content] of Object.entries(files)) {
      await regularFileAt(this.gitText, dir, path, previous);
      if (content === null) {
        // Safe on the working copy: the path holds a regular file in real folders, as checked above.
        await this.git(dir, 'rm', '--quiet', '--force', '--ignore-unmatch', '--', path);
        continue;
      }
      const blob = (await this.git(dir, { input: content }, 'hash-object', '-w', '--stdin')).trim();
      await this.git(dir, 'update-index', '--add', '--cacheinfo', `100644,${blob},${path}`);
    }
    const staged = (await this.git(dir, 'diff', '--cached', '--name-only')).trim();
    if (!staged && !allowEmpty) return undefined;
    const tree = (await this.git(dir, 'write-tree')).trim();
    const commit = (
      await this.git(
        dir,
        '-c',
        `author.name=${author.name}`,
        '-c',
        `author.email=${author.email}`,
        'commit-tree',
        tree,
        ...(previous ? ['-p', previous] : []),
        '-m',
        message,
      )
    ).trim();
    // The working copy stays the head's until the branch takes the commit.
    await this.git(dir, 'reset', '--quiet', '--hard');
    return { previous, commit };
  }

  /** Moves the branch to a candidate, only from the head it was made on, and the working copy with it. */
  async advance(dir: string, branch: string, { previous, commit }: Candidate): Promise<void> {
    await this.git(
      dir,
      'update-ref',
      '-m',
      'factoryd: change applied',
      `refs/heads/${branch}`,
      commit,
      previous ?? '',
    );
    await this.git(dir, 'reset', '--quiet', '--hard');
  }

  /**
   * The working copy on `branch`, equal to its head (anything left by an interrupted change is
   * discarded: the repository is factoryd's); returns the head, undefined before the first commit.
   */
  private async clean(dir: string, branch: string): Promise<string | undefined> {
    const head = await this.git(dir, 'rev-parse', '--verify', '--quiet', 'HEAD').then(
      (out) => out.trim(),
      () => undefined,
    );
    if (head === undefined) return undefined;
    await this.git(dir, 'checkout', '--quiet', '--force', branch);
    await this.git(dir, 'reset', '--quiet', '--hard');
    return (await this.git(dir, 'rev-parse', 'HEAD')).trim();
  }

  private readonly gitText: GitText = (dir, ...args) => this.git(dir, ...args);

  private async git(dir: string, ...args: string[]): Promise<string>;
  private async git(dir: string, opts: { input: string }, ...args: string[]): Promise<string>;
  private async git(dir: string, ...rest: Array<string | { input: string }>): Promise<string> {
    const input = typeof rest[0] === 'object' ? (rest.shift() as { input: string }).input : undefined;
    const args = rest as string[];
    try {
      return (await this.runner.run([...COMMITTER, ...ISOLATED, ...args], dir, input)).toString('utf8');
    } catch (err) {
      const command = args.find((a, i) => !a.startsWith('-') && args[i - 1] !== '-c');
      const detail = (err instanceof Error ? err.message : String(err)).split('\n')[0];
      throw new Error(`git ${command} in ${dir} failed${detail ? `: ${detail}` : ''}`, { cause: err });
    }
  }
}

/** The machine user's login name, as git accepts it in an identity. */
function loginName(): string {
  let name = '';
  try {
    name = userInfo().username;
  } catch {
    // A uid without a passwd entry (a container run with --user 1234, say).
  }
  return name.replace(/[<>\r\n\0\s]/g, '') || `uid-${process.getuid?.() ?? 'unknown'}`;
}

/** The git author of a principal: its display name, and `<principal uid>@factoryd.invalid` as a stable e-mail. */
export function authorOf(principal: { uid: string; displayName: string }): Author {
  // git refuses names with angle brackets or line breaks.
  const name = principal.displayName.replace(/[<>\r\n\0]/g, ' ').trim();
  return { name: name || principal.uid, email: `${principal.uid}@factoryd.invalid` };
}
/**
 * The blob of `path` at `commit` if it is a regular file (undefined if it does not exist, or there
 * is no commit yet); a 409 if it, or a folder on its way, is a symbolic link, a submodule or anything
 * else but plain folders and files. Paths are factoryd's own (`webhooks/<name>.yaml`); one reaching
 * outside the repository is refused outright.
 */
export async function regularFileAt(
  git: GitText,
  dir: string,
  path: string,
  commit: string | undefined,
): Promise<string | undefined> {
  const parts = path.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.toLowerCase() === '.git'))
    throw new InvalidRequest(`${path} is not a path inside the repository`);
  if (!commit) return undefined;
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  const listing = await git(dir, '--literal-pathspecs', 'ls-tree', '-t', '-z', commit, '--', ...prefixes);
  const modes = new Map<string, { mode: string; sha: string }>();
  for (const line of listing.split('\0')) {
    const tab = line.indexOf('\t');
    if (tab < 0) continue;
    const [mode, , sha] = line.slice(0, tab).split(' ');
    modes.set(line.slice(tab + 1), { mode, sha });
  }
  for (const [i, prefix] of prefixes.entries()) {
    const entry = modes.get(prefix);
    if (!entry) return undefined;
    const last = i === prefixes.length - 1;
    if (!last && entry.mode === '040000') continue;
    if (last && (entry.mode === '100644' || entry.mode === '100755')) return entry.sha;
    const what =
      entry.mode === '120000'
        ? 'a symbolic link'
        : entry.mode === '160000'
          ? 'a submodule'
          : `not a ${last ? 'regular file' : 'folder'}`;
    throw new Conflict(
      `${prefix} is ${what} in the factory's repository, so factoryd will not ${last ? 'rewrite' : 'write under'} it: it writes only regular files inside its repository and never follows links. Commit a regular file in its place (or remove it), then try again`,
    );
  }
  return undefined;
}
