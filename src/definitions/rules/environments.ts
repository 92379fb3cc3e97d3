import { isRemote, RepositoryRefused } from '../../git/repository-url.js';
import type { EnvironmentDefinition } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';
import { dataOf, isValid, type Findings, type ValidationContext } from './rule.js';
import { setSecretCommand } from '../../secrets/secret-commands.js';

/** At most this many environment files per factory. */
const MAX_ENVIRONMENTS = 50;

/**
 * Variables an environment may not set: the harness's own (its workspace, the run it serves) and
 * what git and the shell read to run programs or reach a credential.
 */
const RESERVED_VARIABLE = /^(FACTORYD_.*|HOME|PATH|GIT_.*|LD_.*|SSH_AUTH_SOCK)$/;

type RepositoryInFile = Partial<EnvironmentDefinition['repositories'][number]>;
type EnvironmentFile = Omit<Partial<EnvironmentDefinition>, 'repositories'> & {
  repositories?: RepositoryInFile[];
};

/** The folder a repository is cloned into when the file names none: the last part of its URL, without `.git`. */
export function defaultRepositoryPath(url: string): string {
  const last =
    url
      .replace(/[/\\]+$/, '')
      .split(/[/:\\]/)
      .pop() ?? '';
  const name = last.replace(/\.git$/, '');
  return /^[A-Za-z0-9_][A-Za-z0-9._-]*$/.test(name) ? name : 'repository';
}

/**
 * environments/<name>.yaml: repositories git may fetch (no credential in a URL: a secret names it),
 * a branch or a ref (not both), folders that do not collide, variables that are not the harness's
 * own, and (with the service) secrets that exist.
 */
export function checkEnvironments(
  files: DefinitionFile[],
  findings: Findings,
  ctx: ValidationContext,
): EnvironmentDefinition[] {
  const out = files.map((f, i) => {
    const d = dataOf<EnvironmentFile>(f);
    const path = f.source.path;
    const line = (...key: Array<string | number>) => f.source.lineOf(key);
    const e: EnvironmentDefinition = {
      name: f.name,
      path,
      description: d.description,
      dockerImage: d.dockerImage,
      network: d.network,
      repositories: (d.repositories ?? []).map((r) => ({
        url: r.url ?? '',
        path: r.path ?? defaultRepositoryPath(r.url ?? ''),
        branch: r.branch,
        ref: r.ref,
        credentialSecret: r.credentialSecret,
        username: r.username,
      })),
      setupCommands: d.setupCommands ?? [],
      env: d.env ?? {},
      secrets: d.secrets ?? {},
    };
    if (i === MAX_ENVIRONMENTS)
      findings.error(
        path,
        1,
        `a factory has at most ${MAX_ENVIRONMENTS} environment files and this one has ${files.length}`,
      );
    if (!isValid(f)) return e;
    const folders = new Map<string, number>();
    e.repositories.forEach((r, n) => {
      const problem = repositoryUrlProblem(r.url);
      if (problem) findings.error(path, line('repositories', n, 'url'), problem);
      if (r.branch && r.ref)
        findings.error(
          path,
          line('repositories', n, 'ref'),
          'give either branch (its head is checked out) or ref (a commit or tag), not both',
        );
      const top = r.path.split('/')[0]!;
      const clash = [...folders.keys()].find(
        (p) => p === r.path || p.startsWith(`${r.path}/`) || r.path.startsWith(`${p}/`),
      );
      if (clash !== undefined)
        findings.error(
          path,
          line('repositories', n, r.path === defaultRepositoryPath(r.url) ? 'url' : 'path'),
          `repositories ${folders.get(clash)! + 1} and ${n + 1} would both be cloned into ${clash === r.path ? r.path : top}: give one of them another path`,
        );
      folders.set(r.path, n);
    });
    if (e.network === 'bridge' && ctx.bridgeEnvironments && !ctx.bridgeEnvironments.includes(e.name))
      findings.error(path, line('network'), bridgeRefused(e.name, ctx.team));
    for (const [kind, names] of [
      ['env', Object.keys(e.env)],
      ['secrets', Object.keys(e.secrets)],
    ] as const)
      for (const name of names)
        if (RESERVED_VARIABLE.test(name))
          findings.error(
            path,
            line(kind, name),
            `${name} is set by factoryd or changes what programs run (FACTORYD_*, HOME, PATH, GIT_*, LD_*, SSH_AUTH_SOCK are refused): use another name`,
          );
    for (const name of Object.keys(e.secrets))
      if (name in e.env)
        findings.error(path, line('secrets', name), `${name} is both in env and in secrets: keep one`);
    if (ctx.secrets) {
      const missing = (secret: string, where: Array<string | number>) => {
        if (!ctx.secrets!.has(secret))
          findings.error(
            path,
            line(...where),
            `secret "${secret}" does not exist${ctx.team ? ` in team ${ctx.team}` : ''}: create it with ${setSecretCommand(secret, { team: ctx.team })} (it asks for the value)`,
          );
      };
      e.repositories.forEach(
        (r, n) => r.credentialSecret && missing(r.credentialSecret, ['repositories', n, 'credentialSecret']),
      );
      for (const [name, secret] of Object.entries(e.secrets)) missing(secret, ['secrets', name]);
    }
    return e;
  });
  if (
    !ctx.secrets &&
    out.some((e) => e.repositories.some((r) => r.credentialSecret) || Object.keys(e.secrets).length)
  )
    findings.unchecked('environment secrets (credentialSecret, secrets)', ctx);
  const bridged = out.filter((e) => e.network === 'bridge');
  if (!ctx.bridgeEnvironments && bridged.length)
    findings.skipped.push(
      `network: bridge (${bridged.map((e) => e.path).join(', ')}) was not checked: the service applies it only to environments its WORKER_DOCKER_BRIDGE_ENVIRONMENTS names`,
    );
  return out;
}

/**
 * Why an environment may not have Docker's bridge: the operator has not given it. The same words
 * at claim time (EnvironmentResolver) for an environment stored before the rule, or since unlisted.
 */
export function bridgeRefused(environment: string, team: string | undefined): string {
  return (
    `network: bridge gives the container Docker's bridge network (this machine's ports through its gateway, ` +
    `cloud metadata addresses, the internet, none of it logged), so only the operator can grant it: ` +
    `the service's WORKER_DOCKER_BRIDGE_ENVIRONMENTS does not list ${team ?? 'TEAM'}:${environment}. ` +
    `Use network: none (out through factoryd's egress proxy; the operator widens it with HARNESS_EGRESS_ALLOW), or ask the operator`
  );
}

/** Why git may not fetch `url` for an environment; undefined when it may (a local path is checked on the worker, before each fetch, by the repository policy). */
function repositoryUrlProblem(url: string): string | undefined {
  try {
    if (isRemote(url)) {
      // A user and password, or an https user (a token is one): stored, logged and shown with the URL.
      if (/^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]*@/i.test(url) || /^https:\/\/[^/@]*@/i.test(url))
        return 'the URL carries a user or a token: remove it, and name a team secret in credentialSecret (and the user in username)';
      return undefined;
    }
  } catch (err) {
    if (err instanceof RepositoryRefused) return err.message;
    throw err;
  }
  if (!url.startsWith('/'))
    return `${url} is neither a URL nor an absolute path: give a git URL, or an absolute folder under FACTORY_REPO_ROOTS`;
  return undefined;
}
