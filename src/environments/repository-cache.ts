import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { GitCredentials, GitRunner } from '../git/git-runner.js';
import { isRemote, RepositoryRefused } from '../git/repository-url.js';
import type { ResolvedRepository } from './resolved-environment.js';

/** A repository cloned for a run, waiting in the cache's staging folder to be moved into its workspace. */
export interface StagedRepository {
  /** The clone (the launcher moves it to `path` in the workspace and gives it to the harness's user). */
  from: string;
  path: string;
  commit: string;
}

/** A repository that could not be cloned: the message says which and why, with no secret in it. */
export class RepositoryFailed extends Error {}

/**
 * `file` is allowed for the calls that read this process's own mirrors, and local repositories the
 * policy checked, alone.
 */
const LOCAL = ['-c', 'protocol.file.allow=always'];

/**
 * How a local repository is read: from the git directory the policy checked, as a `file://` URL (git's
 * transport: nothing hard-linked into a folder the team writes, only what upload-pack sends), by an
 * upload-pack that takes that very folder (`--strict`: it looks for no `.git` inside it and follows no
 * `.git` file). Given a plain path, `git clone` looks the repository up itself, and upload-pack
 * without `--strict` tries `<path>/.git` first: a `.git` file there (`gitdir: <acme's .git>`) cloned
 * acme's head (issue #32).
 */
const STRICT_UPLOAD_PACK = ['--upload-pack', 'git-upload-pack --strict'];

/** The team a run belongs to: its id names its mirrors, its name its roots (FACTORY_REPO_ROOTS `TEAM=/folder`). */
export interface RunTeam {
  id: string;
  name: string;
}

/**
 * Whether `team` may clone the local repository at `path` (RepositoryPolicy.checkEnvironmentRepository,
 * the rules of a factory's repository): resolves to the real git directory that was checked, or
 * throws RepositoryRefused with the rule and the fix.
 */
export type LocalRepositoryCheck = (path: string, team: RunTeam) => Promise<string>;

/**
 * The worker's repository cache: a bare mirror per (team, repository URL), fetched before each run
 * that needs it, and a clone that borrows the mirror's objects and then copies them
 * (`--reference … --dissociate`), so a repository is downloaded once per worker and each later run
 * fetches only what is new. The folder is the worker's alone (mode 0700, hidden from bwrap
 * sandboxes, another uid's harness cannot enter it); mirrors are kept per team, so a team never
 * clones from objects another team fetched with its own credentials.
 *
 * Credentials: an https token reaches git through a credential helper that reads it from the
 * environment of that one git call; an ssh key is a 0600 file in the cache for the call's length,
 * named by GIT_SSH_COMMAND. Neither is ever in a URL, an argument or a message.
 */
export class RepositoryCache {
  /** Fetches of one mirror run one at a time (two runs of a team on one repository share it). */
  private readonly busy = new Map<string, Promise<unknown>>();
  /** When the cache was last swept for mirrors no run used (pruneUnused). */
  private sweptAt = 0;

  constructor(
    readonly root: string,
    private readonly git: GitRunner,
    /** Which local repositories an environment may name: the policy of factories' repositories. */
    private readonly checkLocal: LocalRepositoryCheck,
    /** REPOSITORY_CACHE_DAYS: a mirror no run used for this long is removed (0: never). */
    private readonly keepDays = 14,
  ) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
    chmodSync(root, 0o700);
  }

  /**
   * Removes the mirrors no run has used for `keepDays` (a mirror's folder time is set at each use),
   * and what a clone cut short by a crash left beside them: once an hour at most, when a run stages
   * its repositories, never a mirror being fetched. Without it every repository any run ever named
   * stays on the worker's disk. Returns the folders removed.
   */
  pruneUnused(now = Date.now()): string[] {
    if (!this.keepDays || now - this.sweptAt < SWEEP_INTERVAL_MS) return [];
    this.sweptAt = now;
    const unusedSince = now - this.keepDays * DAY_MS;
    const removed: string[] = [];
    const teams = join(this.root, 'teams');
    for (const team of folders(teams))
      for (const entry of folders(join(teams, team))) {
        const path = join(teams, team, entry);
        const mirror = path.split(BEING_MADE)[0]!;
        if (!mirror.endsWith('.git') || this.busy.has(mirror)) continue;
        // Gone meanwhile (another worker on this cache swept it), or used since: left alone.
        if ((statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? now) >= unusedSince) continue;
        rmSync(path, { recursive: true, force: true });
        removed.push(path);
      }
    return removed;
  }

  /** Clones each repository (at its branch or ref) into `staging`, fresh from the team's mirrors. */
  async stage(
    team: RunTeam,
    repositories: ResolvedRepository[],
    secretValues: Record<string, string>,
    staging: string,
  ): Promise<StagedRepository[]> {
    this.pruneUnused();
    mkdirSync(staging, { recursive: true, mode: 0o700 });
    const staged: StagedRepository[] = [];
    for (const [i, r] of repositories.entries()) {
      const secret = r.credential_secret ? secretValues[r.credential_secret] : undefined;
      const what = `repository ${i + 1} (${r.url})`;
      try {
        const mirror = await this.fetched(team, r, secret);
        staged.push(await this.cloneFrom(mirror, r, join(staging, String(i))));
      } catch (err) {
        // A refusal is the rule and its fix, not a failed fetch: no hint about credentials.
        if (err instanceof RepositoryRefused)
          throw new RepositoryFailed(`Repository ${i + 1} (${r.url}) is refused: ${err.message}`);
        const said = redact(err instanceof Error ? err.message : String(err), secret);
        const hint = r.credential_secret
          ? ` (credential: the team secret "${r.credential_secret}")`
          : ' (no credentialSecret: a private repository needs one)';
        throw new RepositoryFailed(`Cloning ${what} failed${hint}: ${said}`);
      }
    }
    return staged;
  }

  /** The team's mirror of `r.url`, made or fetched now. */
  private async fetched(team: RunTeam, r: ResolvedRepository, secret: string | undefined): Promise<string> {
    // A local repository is checked before each fetch (its links may have moved since the last), and
    // read from the git directory that was checked, never through the path the environment names.
    const from = isRemote(r.url) ? undefined : await this.checkLocal(r.url, team);
    const teamDir = join(this.root, 'teams', team.id.replace(/[^A-Za-z0-9-]/g, '_'));
    const mirror = join(teamDir, `${createHash('sha256').update(r.url).digest('hex').slice(0, 32)}.git`);
    const previous = this.busy.get(mirror) ?? Promise.resolve();
    const work = previous
      .catch(() => undefined)
      .then(() =>
        this.withCredential(teamDir, r, secret, async (env, credentials) => {
          const transport = from ? LOCAL : [];
          const uploadPack = from ? STRICT_UPLOAD_PACK : [];
          if (existsSync(mirror)) {
            // In use from now: another worker process on this cache (busy is this process's) keeps it.
            usedNow(mirror);
            if (from) await this.git.run(['remote', 'set-url', 'origin', fileUrl(from)], mirror);
            await this.git.run(
              [...transport, 'fetch', ...uploadPack, '--prune', '--quiet', 'origin'],
              mirror,
              undefined,
              env,
              credentials,
            );
          } else {
            mkdirSync(teamDir, { recursive: true, mode: 0o700 });
            // Made aside and renamed: a clone cut short leaves no half mirror behind.
            const fresh = `${mirror}${BEING_MADE}${randomBytes(4).toString('hex')}`;
            try {
              await this.git.run(
                [
                  ...transport,
                  'clone',
                  '--mirror',
                  '--quiet',
                  ...uploadPack,
                  '--',
                  from ? fileUrl(from) : r.url,
                  fresh,
                ],
                teamDir,
                undefined,
                env,
                credentials,
              );
              renameSync(fresh, mirror);
            } finally {
              rmSync(fresh, { recursive: true, force: true });
            }
          }
          usedNow(mirror);
        }),
      );
    this.busy.set(mirror, work);
    try {
      await work;
    } finally {
      if (this.busy.get(mirror) === work) this.busy.delete(mirror);
    }
    return mirror;
  }

  /** A clone of the mirror that owns its objects, at the branch or ref, its origin the repository's URL. */
  private async cloneFrom(mirror: string, r: ResolvedRepository, dest: string): Promise<StagedRepository> {
    const at = r.ref ? ['--no-checkout'] : r.branch ? ['--branch', r.branch] : [];
    await this.git.run(
      [
        ...LOCAL,
        'clone',
        '--quiet',
        '--no-local',
        '--reference',
        mirror,
        '--dissociate',
        ...at,
        '--',
        mirror,
        dest,
      ],
      this.root,
    );
    await this.git.run(['remote', 'set-url', 'origin', r.url], dest);
    if (r.ref) await this.git.run(['checkout', '--quiet', '--detach', r.ref, '--'], dest);
    const commit = (await this.git.text(['rev-parse', 'HEAD'], dest)).trim();
    return { from: dest, path: r.path, commit };
  }

  /**
   * Runs `work` with what git needs for `r`'s credential, if any: an ssh key through GIT_SSH_COMMAND,
   * or an https token through git-runner's credential helper (for the repository's host only).
   */
  private async withCredential<T>(
    teamDir: string,
    r: ResolvedRepository,
    secret: string | undefined,
    work: (env: Record<string, string>, credentials?: GitCredentials & { host: string }) => Promise<T>,
  ): Promise<T> {
    // An empty helper drops any the machine configured: nothing is asked of, or stored by, them.
    const base = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'credential.helper', GIT_CONFIG_VALUE_0: '' };
    if (secret === undefined) return work(base);
    if (isSsh(r.url)) {
      mkdirSync(teamDir, { recursive: true, mode: 0o700 });
      const keyFile = join(teamDir, `.key-${randomBytes(8).toString('hex')}`);
      writeFileSync(keyFile, secret.endsWith('\n') ? secret : `${secret}\n`, { mode: 0o600 });
      try {
        return await work({
          ...base,
          GIT_SSH_COMMAND: `ssh -i '${keyFile}' -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile='${join(teamDir, 'known_hosts')}' -o ConnectTimeout=30`,
        });
      } finally {
        rmSync(keyFile, { force: true });
      }
    }
    const url = URL.canParse(r.url) ? new URL(r.url) : undefined;
    if (!url || !/^https?:$/.test(url.protocol)) return work(base); // a local path asks for nothing
    return work({}, { host: url.host, username: r.username ?? 'x-access-token', password: secret });
  }
}

/** A mirror's first clone is made beside it under this suffix, then renamed into place. */
const BEING_MADE = '.new-';
const DAY_MS = 24 * 3600_000;
/** How often at most the cache is swept for unused mirrors. */
const SWEEP_INTERVAL_MS = 3600_000;

/** A mirror's last use, which pruneUnused reads: set here, not left to the files git happens to write. */
function usedNow(mirror: string): void {
  const now = new Date();
  utimesSync(mirror, now, now);
}

/** The folders in `dir` (none if it does not exist). */
function folders(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
}

/** ssh://, or `[user@]host:path` (git's own rule: a colon before the first slash, and no scheme). */
function isSsh(url: string): boolean {
  if (/^ssh:\/\//i.test(url)) return true;
  return !/^[a-z][a-z0-9+.-]*:\/\//i.test(url) && /^(?:[^@/:\s]+@)?[^@/:\s]+:/.test(url);
}

/** `gitDir` as a file:// URL (git decodes `%XX` in one; nothing else in a path needs encoding). */
function fileUrl(gitDir: string): string {
  return `file://${gitDir.replaceAll('%', '%25')}`;
}

/** `text` with every occurrence of the secret's value (and of each of its lines) replaced. */
function redact(text: string, secret: string | undefined): string {
  if (!secret) return text;
  let out = text;
  for (const part of [secret, ...secret.split('\n')].filter((p) => p.trim().length >= 4))
    out = out.split(part).join('[secret]');
  return out;
}
