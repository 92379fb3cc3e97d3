import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fromRoot } from '../common/paths.js';
import type { Config, RepoRoot } from '../config/config.js';
import { HOW_TO_GIVE, isRemote, RepositoryRefused } from '../git/repository-url.js';
import type { DefinitionStore } from './definition-store.js';
import { splitCredentials } from './repository-credentials.js';
import { cliCommand } from '../common/cli-command.js';

export { ALLOWED_TRANSPORTS, isRemote, RepositoryRefused } from '../git/repository-url.js';

/** The factory a repository would serve. */
export interface RepositoryOwner {
  teamId: string;
  teamName: string;
  name: string;
  managed: boolean;
}

/** What a refusal tells the team to do instead, by what the repository is for. */
interface Wording {
  /** Who may use a repository: "registers" (a factory) or "names in its environments". */
  verb: string;
  /** The way out when the repository is under DATA_DIR. */
  dataDirFix: string;
  /** The alternative to a local repository. */
  byUrl: string;
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

  /**
   * Throws RepositoryRefused unless `repoUrl` may be the repository of `owner`. For a local
   * repository, resolves to the real path of the git directory that was checked: read it there (and
   * not through `repoUrl`, whose links may have moved since).
   */
  async check(repoUrl: string, owner: RepositoryOwner): Promise<string | undefined> {
    splitCredentials(repoUrl); // throws for credentials no transport may carry
    if (isRemote(repoUrl)) return undefined;
    return this.checkLocal(repoUrl, owner, {
      verb: 'registers',
      dataDirFix: `register the team's own repository (${HOW_TO_GIVE} under FACTORY_REPO_ROOTS), or let factoryd create one with \`${cliCommand(`factories add ${owner.name} --managed`)}\``,
      byUrl: 'register the repository by its URL',
    });
  }

  /**
   * The same rules for a local repository an environment of `team` names (docs/environments.md): a
   * run's workspace gets a clone of it, so it is another way to read a repository. No repository is
   * the environment's own, so nothing under DATA_DIR is: a team's managed factory repository
   * included. Resolves to the real path of the git directory that was checked: clone that.
   */
  checkEnvironmentRepository(path: string, team: { id: string; name: string }): Promise<string> {
    return this.checkLocal(
      path,
      { teamId: team.id, teamName: team.name, name: '', managed: false },
      {
        verb: 'names in its environments',
        dataDirFix: 'name a repository of the team under FACTORY_REPO_ROOTS, or a repository by its URL',
        byUrl: 'name the repository by its URL',
      },
    );
  }

  private async checkLocal(repoUrl: string, owner: RepositoryOwner, words: Wording): Promise<string> {
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
    const roots = this.config.factoryRepoRoots.map((r) => ({ ...r, folder: realOr(r.folder) }));
    const open = roots.filter((r) => r.team === undefined || r.team === owner.teamName);
    // The folder first (a folder inside a refused repository is refused for that); then what git reads
    // through `.git` files, worktrees' common dirs and alternates, each checked the same way.
    const refuse = (place: string) => {
      const where = place === top ? top : `${top} (its git data at ${place})`;
      if (others.some((m) => inside(place, m)))
        throw new RepositoryRefused(
          `${where} is the managed repository of another team's factory: a team ${words.verb} only its own repositories`,
        );
      if (own && inside(place, own)) return;
      if (inside(place, dataDir))
        throw new RepositoryRefused(
          `${where} is inside factoryd's DATA_DIR (${dataDir}), which holds its database, keys and the teams' managed repositories: ${words.dataDirFix}`,
        );
      if (configured) return;
      // The innermost root decides: a folder bound to a team inside a shared root is that team's alone.
      const root = roots
        .filter((r) => inside(place, r.folder))
        .sort((a, b) => b.folder.length - a.folder.length)[0];
      if (root?.team !== undefined && root.team !== owner.teamName)
        throw new RepositoryRefused(
          `${where} is under ${root.folder}, which FACTORY_REPO_ROOTS gives to the team ${root.team} alone: a team ${words.verb} only repositories under its own roots (${describeRoots(open)})`,
        );
      if (!root)
        throw new RepositoryRefused(
          `${where} is outside FACTORY_REPO_ROOTS for the team ${owner.teamName} (${describeRoots(open)}): set FACTORY_REPO_ROOTS to allow local repositories under ${dirname(place)} (absolute folders separated by ":", each TEAM=/folder for one team or /folder for all), or ${words.byUrl}`,
        );
    };
    refuse(top);
    const data = gitDataOf(top);
    data.places.forEach(refuse);
    for (const place of data.places) refuseLinksAndDotGitIn(place, top);
    return data.gitDir;
  }

  /** The repository factoryd itself created for this factory, if it is one it creates. */
  private ownRepositoryOf(owner: RepositoryOwner): string | undefined {
    if (owner.managed) return realOr(managedRepositoryPath(this.config.dataDir, owner.teamName, owner.name));
    if (owner.teamName === 'default' && owner.name === 'example')
      return realOr(exampleRepositoryPath(this.config.dataDir));
    return undefined;
  }
}

function describeRoots(roots: RepoRoot[]): string {
  return roots.length ? roots.map((r) => r.folder).join(', ') : 'none set';
}

/**
 * The git directories a repository's top folder reads from (its own, a worktree's common dir,
 * alternates, alternates of alternates), as real paths; `gitDir` is where to run git.
 */
function gitDataOf(top: string): { gitDir: string; places: string[] } {
  const dotGit = join(top, '.git');
  let gitDir: string;
  const st = lstatSync(dotGit, { throwIfNoEntry: false });
  if (st?.isSymbolicLink()) throw linkRefused(dotGit);
  if (st?.isDirectory()) gitDir = dotGit;
  else if (st?.isFile()) {
    const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, 'utf8'))?.[1];
    if (!pointer) throw new RepositoryRefused(`${dotGit} is not a git directory pointer`);
    gitDir = realOr(resolve(top, pointer));
    // A pointer to a pointer: git would follow the second one too, to a folder no check has seen.
    if (!lstatSync(gitDir, { throwIfNoEntry: false })?.isDirectory() || !existsSync(join(gitDir, 'HEAD')))
      throw new RepositoryRefused(
        `${dotGit} points to ${gitDir}, which is not a git directory: a .git file must name the git directory itself`,
      );
  } else if (existsSync(join(top, 'HEAD')) && existsSync(join(top, 'objects'))) gitDir = top;
  else
    throw new RepositoryRefused(
      `${top} is not the top folder of a git repository: give the folder that holds .git (or a bare repository)`,
    );
  const commonFile = join(gitDir, 'commondir');
  const common = existsSync(commonFile) ? realOr(resolve(gitDir, readText(commonFile).trim())) : gitDir;
  const places = new Set([gitDir, common]);
  // git follows alternates of alternates (five deep); each object folder is a place it reads.
  const objectDirs = [join(common, 'objects')];
  for (const objects of objectDirs) {
    const file = join(objects, 'info', 'alternates');
    if (!existsSync(file) || objectDirs.length > 6) continue;
    for (const line of readText(file).split('\n')) {
      const entry = line.trim();
      if (!entry || entry.startsWith('#')) continue;
      const alternate = realOr(resolve(objects, entry));
      if (places.has(alternate)) continue;
      places.add(alternate);
      objectDirs.push(alternate);
    }
  }
  return { gitDir, places: [...places] };
}

/** A file of git data read as text; a link there is refused like any other (refuseLinksAndDotGitIn). */
function readText(file: string): string {
  if (lstatSync(file).isSymbolicLink()) throw linkRefused(file);
  return readFileSync(file, 'utf8');
}

/**
 * Refuses a symbolic link, or anything named `.git`, anywhere in a folder of git data (`top`'s). git
 * follows links (objects/, refs/heads/, one ref file, packed-refs, HEAD), so a link there reads
 * another repository's commits as this one's. And git run in a git directory looks for a `.git` in
 * it before taking the folder itself: a `.git` file there (`gitdir: <acme's .git>`) or a `.git/`
 * folder (with its own commondir or alternates) would be read instead of what was checked, by
 * anything that finds the repository from its folder (a clone of the path does). git itself makes
 * neither. (A hard link needs write access to its target under Linux's default
 * fs.protected_hardlinks, which a team lacks on another's files.)
 */
function refuseLinksAndDotGitIn(folder: string, top: string): void {
  for (const entry of readdirSync(folder, { withFileTypes: true, recursive: true })) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isSymbolicLink()) throw linkRefused(path);
    if (entry.name === '.git')
      throw new RepositoryRefused(
        `${path} is a .git ${entry.isDirectory() ? 'folder' : 'file'} inside the git data of ${top}: git would take it for the repository and read whatever it names (another team's included) instead of the folder that was checked; git never makes one there: remove it, or give the repository by its URL`,
      );
  }
}

function linkRefused(link: string): RepositoryRefused {
  let target: string;
  try {
    target = readlinkSync(link);
  } catch {
    target = 'somewhere';
  }
  return new RepositoryRefused(
    `${link} is a symbolic link (to ${target}): git would read whatever it leads to as this repository, another team's included, so a repository's git data may hold no links; replace it with the file or folder itself, or give the repository by its URL`,
  );
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
