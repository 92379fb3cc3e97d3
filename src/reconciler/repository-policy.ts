import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fromRoot } from '../common/paths.js';
import type { Config } from '../config/config.js';
import { HOW_TO_GIVE, isRemote, RepositoryRefused } from '../git/repository-url.js';
import type { DefinitionStore } from './definition-store.js';

export { ALLOWED_TRANSPORTS, isRemote, RepositoryRefused } from '../git/repository-url.js';

/** The factory a repository would serve. */
export interface RepositoryOwner {
  teamId: string;
  teamName: string;
  name: string;
  managed: boolean;
}

/** Where factoryd creates a managed factory's repository (`factoryd factories add NAME --managed`). */
export function managedRepositoryPath(dataDir: string, team: string, factory: string): string {
  return join(dataDir, 'factories', 'teams', team, factory);
}

/** Where the first `factoryd serve` seeds the example factory (team `default`, factory `example`). */
export function exampleRepositoryPath(dataDir: string): string {
  return join(dataDir, 'factories', 'example');
}

/**
 * Which repositories a factory may read (docs/security.md, "Factory registration"): teams share the
 * service and must not reach each other's definitions, or factoryd's own files, through the path
 * they register. Checked when a factory is registered and again before every reconcile, so a row
 * written by an older version or by hand, or a symlink swapped in later, is refused the same way.
 */
export class RepositoryPolicy {
  constructor(
    private readonly config: Pick<Config, 'dataDir' | 'factoryRepo' | 'factoryRepoRoots'>,
    private readonly store: Pick<DefinitionStore, 'managedRepositoriesOfOtherTeams'>,
  ) {}

  /** Throws RepositoryRefused unless `repoUrl` may be the repository of `owner`. */
  async check(repoUrl: string, owner: RepositoryOwner): Promise<void> {
    if (isRemote(repoUrl)) return;
    if (!existsSync(repoUrl))
      throw new RepositoryRefused(`${repoUrl} does not exist: give ${HOW_TO_GIVE} that exists`);
    const top = realpathSync(repoUrl);
    // The operator's own FACTORY_REPO (and the shipped example) belong to the team default only.
    const configured =
      owner.teamName === 'default' &&
      [this.config.factoryRepo, fromRoot('examples', 'factory')].some((p) => p && realOr(p) === top);
    const others = (await this.store.managedRepositoriesOfOtherTeams(owner.teamId)).map(realOr);
    const own = this.ownRepositoryOf(owner);
    const dataDir = realOr(this.config.dataDir);
    const roots = this.config.factoryRepoRoots.map(realOr);
    // The folder first (a folder inside a refused repository is refused for that); then what git reads
    // through `.git` files, worktrees' common dirs and alternates, each checked the same way.
    const places = function* () {
      yield top;
      yield* gitDataOf(top);
    };
    for (const place of places()) {
      const where = place === top ? top : `${top} (its git data at ${place})`;
      if (others.some((m) => inside(place, m)))
        throw new RepositoryRefused(
          `${where} is the managed repository of another team's factory: a team registers only its own repositories`,
        );
      if (own && inside(place, own)) continue;
      if (inside(place, dataDir))
        throw new RepositoryRefused(
          `${where} is inside factoryd's DATA_DIR (${dataDir}), which holds its database, keys and the teams' managed repositories: register the team's own repository (${HOW_TO_GIVE} under FACTORY_REPO_ROOTS), or let factoryd create one with \`factoryd factories add ${owner.name} --managed\``,
        );
      if (configured) continue;
      if (!roots.some((root) => inside(place, root)))
        throw new RepositoryRefused(
          `${where} is outside FACTORY_REPO_ROOTS (${roots.length ? roots.join(', ') : 'none set'}): set FACTORY_REPO_ROOTS to allow local repositories under ${dirname(place)} (absolute folders separated by ":"), or register the repository by its URL`,
        );
    }
  }

  /** The repository factoryd itself created for this factory, if it is one it creates. */
  private ownRepositoryOf(owner: RepositoryOwner): string | undefined {
    if (owner.managed) return realOr(managedRepositoryPath(this.config.dataDir, owner.teamName, owner.name));
    if (owner.teamName === 'default' && owner.name === 'example')
      return realOr(exampleRepositoryPath(this.config.dataDir));
    return undefined;
  }
}

/** The git directories a repository's top folder reads from (its own, a worktree's common dir, alternates). */
function gitDataOf(top: string): string[] {
  const dotGit = join(top, '.git');
  let gitDir: string;
  const st = statSync(dotGit, { throwIfNoEntry: false });
  if (st?.isDirectory()) gitDir = dotGit;
  else if (st?.isFile()) {
    const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (!pointer) throw new RepositoryRefused(`${dotGit} is not a git directory pointer`);
    gitDir = resolve(top, pointer);
  } else if (existsSync(join(top, 'HEAD')) && existsSync(join(top, 'objects'))) gitDir = top;
  else
    throw new RepositoryRefused(
      `${top} is not the top folder of a git repository: register the folder that holds .git (or a bare repository)`,
    );
  const common = existsSync(join(gitDir, 'commondir'))
    ? resolve(gitDir, readFileSync(join(gitDir, 'commondir'), 'utf8').trim())
    : gitDir;
  const alternatesFile = join(common, 'objects', 'info', 'alternates');
  const alternates = existsSync(alternatesFile)
    ? readFileSync(alternatesFile, 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => resolve(common, 'objects', l))
    : [];
  return [...new Set([gitDir, common, ...alternates].map(realOr))];
}

/** The real path (symlinks and `..` resolved) of `p`, or its absolute form when it does not exist. */
function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return resolve(p);
  }
}

/** `p` is `folder` or inside it (both real paths). */
function inside(p: string, folder: string): boolean {
  const rel = relative(folder, p);
  return rel === '' || (rel !== '..' && !rel.startsWith('../') && !isAbsolute(rel));
}
