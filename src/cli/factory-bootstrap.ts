import { lstatSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { parse } from 'yaml';
import { AuthRepository } from '../auth/auth.repository.js';
import { fromRoot } from '../common/paths.js';
import type { Config } from '../config/config.js';
import { DefinitionStore } from '../reconciler/definition-store.js';
import type { AuthMode } from '../definitions/definition.js';
import { Conflict } from '../common/problem.js';
import { FactoryRegistrations, type RegisteredFactory } from '../management/factory-registrations.js';
import { ManagedRepositories, regularFileAt } from '../management/managed-repositories.js';
import { generatedSecretKind } from '../management/webhook-file.js';
import { GitRunner } from '../git/git-runner.js';
import { GitSource } from '../reconciler/git-source.js';
import { withoutCredentials } from '../reconciler/repository-credentials.js';
import { exampleRepositoryPath } from '../reconciler/repository-policy.js';
import { ReconcileScheduler } from '../reconciler/reconcile-scheduler.js';
import { Reconciler } from '../reconciler/reconciler.js';
import { SecretsService } from '../secrets/secrets.service.js';
import type { RunningService } from '../service.js';
import { FACTORY_NAME_PATTERN } from '../contract/generated.js';

const EXAMPLE = fromRoot('examples', 'factory');
/** How the example's automations name a webhook before it has a UID. */
const PLACEHOLDER = /uid-of-([A-Za-z0-9._-]+)/g;

/** What the start did to the default team's factory: lines to print, and the secrets it generated. */
export interface FactoryBootstrap {
  lines: string[];
  /** The team secrets the example's webhooks name, generated now: shown (and saved) once, by `serve`. */
  secrets: Array<{ name: string; value: string }>;
}

/**
 * The default team's factory on a start of `factoryd serve`. FACTORY_REPO set: that repository,
 * registered once. Unset: on the first start, the example factory, seeded into a repository under
 * DATA_DIR/factories/example as a person would (webhooks first, then automations on their UIDs),
 * with the team secrets its webhooks name.
 */
export async function bootstrapFactory(service: RunningService, config: Config): Promise<FactoryBootstrap> {
  try {
    return await registerDefaultFactory(service, config);
  } catch (err) {
    // The API serves without a factory; say what went wrong instead of refusing to start.
    return {
      lines: [`factory: not set up: ${err instanceof Error ? err.message : String(err)}`],
      secrets: [],
    };
  }
}

async function registerDefaultFactory(service: RunningService, config: Config): Promise<FactoryBootstrap> {
  const app = service.app;
  const store = app.get(DefinitionStore);
  const reconciler = app.get(Reconciler);
  const runner = app.get(GitRunner);
  const team = await app.get(AuthRepository).findTeamByName('default');
  const nothing: FactoryBootstrap = { lines: [], secrets: [] };
  if (!team) return nothing;
  const existing = await store.listAll();
  const lines: string[] = [];

  if (config.factoryRepo && resolve(config.factoryRepo) !== resolve(EXAMPLE)) {
    const repoUrl = GitSource.isLocal(config.factoryRepo) ? resolve(config.factoryRepo) : config.factoryRepo;
    if (existing.some((f) => f.repoUrl === withoutCredentials(repoUrl))) return nothing;
    const name = await factoryNameOf(runner, repoUrl, config.factoryBranch);
    let registered: RegisteredFactory;
    try {
      registered = await app.get(FactoryRegistrations).addRepository({
        team,
        name,
        repository: repoUrl,
        branch: config.factoryBranch,
      });
    } catch (err) {
      if (!(err instanceof Conflict)) throw err;
      return { lines: [`factory: ${err.message}; FACTORY_REPO not registered`], secrets: [] };
    }
    const { factory: f, credentialsSecret } = registered;
    if (credentialsSecret)
      lines.push(`factory: the credentials in FACTORY_REPO are kept as the team secret ${credentialsSecret}`);
    const out = await reconciler.request(f.id);
    lines.push(
      `factory: ${name} from ${withoutCredentials(config.factoryRepo)} (${config.factoryBranch}): ${out.result}`,
    );
    for (const e of out.errors.slice(0, 10)) lines.push(`  ${e.path}:${e.line}: ${e.message}`);
    return { lines, secrets: [] };
  }

  if (existing.some((f) => f.teamId === team.id && f.name === 'example')) return nothing;
  const repo = exampleRepositoryPath(config.dataDir);
  rmSync(repo, { recursive: true, force: true });
  // Written like a managed factory's changes: through git's index, never through a link on disk.
  const repos = app.get(ManagedRepositories);
  const author = { name: 'factoryd', email: 'factoryd@localhost' };
  const files = withSchemaPaths(exampleFiles(), repo);
  const [automations, rest] = [true, false].map((a) =>
    Object.fromEntries(Object.entries(files).filter(([path]) => path.startsWith('automations/') === a)),
  );
  await repos.init(
    repo,
    config.factoryBranch,
    rest,
    author,
    'Agents, skill and webhooks of the example factory',
  );

  // The secrets the webhooks name, generated: shown once, by `serve`.
  const secrets = app.get(SecretsService);
  const created: FactoryBootstrap['secrets'] = [];
  for (const [path, content] of Object.entries(rest)) {
    if (!path.startsWith('webhooks/')) continue;
    const hook = parse(content) as {
      authMode?: AuthMode;
      signatureScheme?: string;
      secretName: string;
    };
    if (await secrets.current(team.id, hook.secretName)) continue;
    // A provider-issued secret (GitHub's) is generated too, like a managed webhook's stand-in: the
    // person gives the provider this value.
    const kind = generatedSecretKind(hook.authMode ?? 'token', hook.signatureScheme) ?? 'token';
    const { value } = await secrets.generate(team.id, hook.secretName, kind);
    created.push({ name: hook.secretName, value });
  }

  const f = (await store.register({
    teamId: team.id,
    name: 'example',
    repoUrl: repo,
    branch: config.factoryBranch,
  }))!;
  const first = await reconciler.request(f.id, true);
  if (first.errors.length) throw new Error(`the example factory did not apply: ${first.errors[0].message}`);
  const hooks = (await store.db.transaction((tx) => store.appliedState(tx, f.id))).webhooks.filter(
    (w) => !w.deleted,
  );
  const uids = new Map(hooks.map((w) => [w.name, w.uid]));
  // The example's own first change: made and moved onto the branch at once (nobody waits for an answer).
  const automationsCommit = await repos.candidate(
    repo,
    config.factoryBranch,
    Object.fromEntries(
      Object.entries(automations).map(([path, content]) => [
        path,
        content.replace(PLACEHOLDER, (all, name: string) => uids.get(name) ?? all),
      ]),
    ),
    author,
    'Automations on the webhooks’ UIDs',
    false,
  );
  if (automationsCommit) await repos.advance(repo, config.factoryBranch, automationsCommit);
  const second = await reconciler.request(f.id);
  if (second.errors.length)
    throw new Error(`the example automations did not apply: ${second.errors[0].message}`);
  await app.get(ReconcileScheduler).pollAll(); // start watching the new repository now

  const base = config.webhookBaseUrl ?? config.publicBaseUrl ?? service.url;
  lines.push(
    `First start: seeded the example factory in ${repo} (2 commits, applied; edit and commit there, or set FACTORY_REPO).`,
    'Webhooks:',
    ...hooks.map(
      (w) => `  ${w.name}: ${base}/webhooks/w/${w.uid}${w.fields.authMode === 'url_token' ? '/{token}' : ''}`,
    ),
  );
  return { lines, secrets: created };
}

/** An editor's schema modeline with a path relative to the file's folder. */
const SCHEMA_MODELINE = /^(# yaml-language-server: \$schema=)(\.{1,2}\/\S+)$/m;

/**
 * The seeded copies of the example's YAML files point their editors at the same schemas as the
 * originals: each relative modeline is rewritten for the file's place under `repo`.
 */
function withSchemaPaths(files: Record<string, string>, repo: string): Record<string, string> {
  return Object.fromEntries(
    Object.entries(files).map(([path, content]) => {
      if (!/\.ya?ml$/.test(path)) return [path, content];
      const schemaOf = (rel: string) => resolve(dirname(join(EXAMPLE, path)), rel);
      const copy = join(repo, path);
      return [
        path,
        content.replace(
          SCHEMA_MODELINE,
          (_all, prefix: string, rel: string) => `${prefix}${relative(dirname(copy), schemaOf(rel))}`,
        ),
      ];
    }),
  );
}

/** The example factory's files by repository path (regular files only). */
function exampleFiles(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const path of readdirSync(EXAMPLE, { recursive: true, encoding: 'utf8' }).sort()) {
    const full = join(EXAMPLE, path);
    if (lstatSync(full).isFile()) files[path.split(sep).join('/')] = readFileSync(full, 'utf8');
  }
  return files;
}

/** factory.yaml's name at the branch head of a local repository; else the repository's name. */
async function factoryNameOf(runner: GitRunner, repoUrl: string, branch: string): Promise<string> {
  if (GitSource.isLocal(repoUrl)) {
    try {
      // Read from git's objects as a managed repository's files are: a regular file only, never a link.
      const git = (dir: string, ...args: string[]) => runner.text(args, dir);
      const blob = await regularFileAt(git, repoUrl, 'factory.yaml', `refs/heads/${branch}`);
      if (!blob) throw new Error('no factory.yaml');
      const text = await git(repoUrl, 'cat-file', 'blob', blob);
      const name = (parse(text) as { name?: unknown })?.name;
      if (typeof name === 'string' && FACTORY_NAME_PATTERN.test(name)) return name;
    } catch {
      /* no factory.yaml yet: fall back to the folder name */
    }
  }
  return (
    basename(repoUrl.replace(/\/+$/, ''))
      .replace(/\.git$/, '')
      .replace(/[^A-Za-z0-9._-]/g, '-') || 'factory'
  );
}
