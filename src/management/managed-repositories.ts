import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Inject, Injectable } from '@nestjs/common';
import { CONFIG, type Config } from '../config/config.js';
import { GitRunner } from '../reconciler/git-runner.js';

/** Who a commit is by: the API key's principal (or, for the CLI, the user at the terminal). */
export interface Author {
  name: string;
  email: string;
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
    await this.git(dir, 'init', '--quiet', `--initial-branch=${branch}`);
    const commit = await this.commit(dir, branch, files, author, message, false);
    return commit!.commit;
  }

  /** The content of `path` at the branch head (undefined when there is no such file). */
  async read(dir: string, branch: string, path: string): Promise<string | undefined> {
    await this.clean(dir, branch);
    const full = join(dir, path);
    return existsSync(full) ? readFileSync(full, 'utf8') : undefined;
  }

  /**
   * Writes `files` and commits them on `branch` by `author`. Without `allowEmpty`, a change that
   * changes nothing makes no commit (undefined). Returns the commit and the head before it.
   */
  async commit(
    dir: string,
    branch: string,
    files: FileChanges,
    author: Author,
    message: string,
    allowEmpty: boolean,
  ): Promise<{ previous: string | undefined; commit: string } | undefined> {
    const previous = await this.clean(dir, branch);
    for (const [path, content] of Object.entries(files)) {
      if (content === null) {
        await this.git(dir, 'rm', '--quiet', '--force', '--ignore-unmatch', '--', path);
        continue;
      }
      const full = join(dir, path);
      mkdirSync(dirname(full), { recursive: true });
      writeFileSync(full, content);
      await this.git(dir, 'add', '--', path);
    }
    const staged = (await this.git(dir, 'diff', '--cached', '--name-only')).trim();
    if (!staged && !allowEmpty) return undefined;
    await this.git(
      dir,
      'commit',
      '--quiet',
      '--allow-empty',
      `--author=${author.name} <${author.email}>`,
      '-m',
      message,
    );
    return { previous, commit: (await this.git(dir, 'rev-parse', 'HEAD')).trim() };
  }

  /** Moves the branch back to `commit` (a change that did not apply must not stay the head). */
  async resetTo(dir: string, branch: string, commit: string): Promise<void> {
    await this.git(dir, 'checkout', '--quiet', '--force', branch);
    await this.git(dir, 'reset', '--quiet', '--hard', commit);
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

  private async git(dir: string, ...args: string[]): Promise<string> {
    try {
      return await this.runner.text([...COMMITTER, ...ISOLATED, ...args], dir);
    } catch (err) {
      const detail = (err instanceof Error ? err.message : String(err)).split('\n')[0];
      throw new Error(`git ${args[0]} in ${dir} failed${detail ? `: ${detail}` : ''}`, { cause: err });
    }
  }
}

/** The git author of a principal: its display name, and `<principal uid>@factoryd.invalid` as a stable e-mail. */
export function authorOf(principal: { uid: string; displayName: string }): Author {
  // git refuses names with angle brackets or line breaks.
  const name = principal.displayName.replace(/[<>\r\n\0]/g, ' ').trim();
  return { name: name || principal.uid, email: `${principal.uid}@factoryd.invalid` };
}
