import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Inject, Injectable } from '@nestjs/common';
import { CONFIG, type Config } from '../config/config.js';

const run = promisify(execFile);

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
  constructor(@Inject(CONFIG) private readonly config: Pick<Config, 'dataDir'>) {}

  pathFor(team: string, factory: string): string {
    return join(this.config.dataDir, 'factories', 'teams', team, factory);
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
    await git(dir, 'init', '--quiet', `--initial-branch=${branch}`);
    const first = (await this.candidate(dir, branch, files, author, message, false))!;
    await this.advance(dir, branch, first);
    return first.commit;
  }

  /** The content of `path` at the branch head (undefined when there is no such file). */
  async read(dir: string, branch: string, path: string): Promise<string | undefined> {
    await this.clean(dir, branch);
    const full = join(dir, path);
    return existsSync(full) ? readFileSync(full, 'utf8') : undefined;
  }

  /**
   * A commit by `author` of `files` on top of the branch head, which does not move: the branch takes
   * it (`advance`) only once it is live, so a change that never got confirmed is never on the branch
   * for a later reconcile to apply. Without `allowEmpty`, a change that changes nothing makes no
   * commit (undefined). Returns the commit and the head it is on.
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
      if (content === null) {
        await git(dir, 'rm', '--quiet', '--force', '--ignore-unmatch', '--', path);
        continue;
      }
      const full = join(dir, path);
      mkdirSync(dirname(full), { recursive: true });
      writeFileSync(full, content);
      await git(dir, 'add', '--', path);
    }
    const staged = (await git(dir, 'diff', '--cached', '--name-only')).trim();
    if (!staged && !allowEmpty) return undefined;
    const tree = (await git(dir, 'write-tree')).trim();
    const commit = (
      await gitWith(
        { GIT_AUTHOR_NAME: author.name, GIT_AUTHOR_EMAIL: author.email },
        dir,
        'commit-tree',
        tree,
        ...(previous ? ['-p', previous] : []),
        '-m',
        message,
      )
    ).trim();
    // The working copy stays the head's until the branch takes the commit.
    await git(dir, 'reset', '--quiet', '--hard');
    return { previous, commit };
  }

  /** Moves the branch to a candidate, only from the head it was made on, and the working copy with it. */
  async advance(dir: string, branch: string, { previous, commit }: Candidate): Promise<void> {
    await git(
      dir,
      'update-ref',
      '-m',
      'factoryd: change applied',
      `refs/heads/${branch}`,
      commit,
      previous ?? '',
    );
    await git(dir, 'reset', '--quiet', '--hard');
  }

  /**
   * The working copy on `branch`, equal to its head (anything left by an interrupted change is
   * discarded: the repository is factoryd's); returns the head, undefined before the first commit.
   */
  private async clean(dir: string, branch: string): Promise<string | undefined> {
    const head = await git(dir, 'rev-parse', '--verify', '--quiet', 'HEAD').then(
      (out) => out.trim(),
      () => undefined,
    );
    if (head === undefined) return undefined;
    await git(dir, 'checkout', '--quiet', '--force', branch);
    await git(dir, 'reset', '--quiet', '--hard');
    return (await git(dir, 'rev-parse', 'HEAD')).trim();
  }
}

/** The git author of a principal: its display name, and `<principal uid>@factoryd.invalid` as a stable e-mail. */
export function authorOf(principal: { uid: string; displayName: string }): Author {
  // git refuses names with angle brackets or line breaks.
  const name = principal.displayName.replace(/[<>\r\n\0]/g, ' ').trim();
  return { name: name || principal.uid, email: `${principal.uid}@factoryd.invalid` };
}

function git(dir: string, ...args: string[]): Promise<string> {
  return gitWith(undefined, dir, ...args);
}

/** git with `env` added to ours (e.g. the author of a commit-tree). */
async function gitWith(
  env: Record<string, string> | undefined,
  dir: string,
  ...args: string[]
): Promise<string> {
  try {
    return (
      await run('git', [...COMMITTER, ...ISOLATED, ...args], {
        cwd: dir,
        encoding: 'utf8',
        env: env && { ...process.env, ...env },
      })
    ).stdout;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`git ${args[0]} in ${dir} failed${stderr ? `: ${stderr.split('\n')[0]}` : ''}`, {
      cause: err,
    });
  }
}
