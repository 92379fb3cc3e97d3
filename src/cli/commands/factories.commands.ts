import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { NotFound } from '../../common/problem.js';
import { SchemaRegistry } from '../../common/schema-validator.js';
import { formatError, type DefinitionError } from '../../definitions/definition.js';
import { checkTreeLimits, type ListedFile } from '../../definitions/definition-limits.js';
import { placementOf } from '../../definitions/definition-file.js';
import { loadDefinition } from '../../definitions/validate-definition.js';
import { FactoryRegistrations } from '../../management/factory-registrations.js';
import type { Author } from '../../management/managed-repositories.js';
import { DefinitionStore, type FactoryRecord } from '../../reconciler/definition-store.js';
import type { PlanSummary } from '../../reconciler/plan.js';
import { Reconciler, type ReconcileOutcome } from '../../reconciler/reconciler.js';
import { setSecretCommand } from '../../secrets/secret-commands.js';
import { teamNamed, withServices } from '../context.js';
import { serviceChecksFor } from '../validation-context.js';
import { print, renderTable } from '../output.js';
import { cliCommand } from '../../common/cli-command.js';

/**
 * The definition files of a folder, by repository path (`.git` and `node_modules` skipped): listed
 * with their sizes first, and read only when the folder is within DEFINITION_LIMITS (else `errors`).
 */
export function readFolder(dir: string): { tree: Map<string, string>; errors: DefinitionError[] } {
  const listed: ListedFile[] = [];
  const errors: DefinitionError[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d)) {
      if (entry === '.git' || entry === 'node_modules') continue;
      const full = join(d, entry);
      // Not followed: the service reads a committed link as a link (checkTreeLimits says why).
      const stat = lstatSync(full);
      if (stat.isDirectory()) walk(full);
      else {
        const path = relative(dir, full).split('\\').join('/');
        if (!placementOf(path)) continue;
        // A FIFO or a device would never end a read.
        if (stat.isSymbolicLink()) listed.push({ path, size: 0, link: true });
        else if (stat.isFile()) listed.push({ path, size: stat.size });
        else errors.push({ path, line: 1, message: 'not a regular file: it was not read' });
      }
    }
  };
  walk(dir);
  errors.push(...checkTreeLimits(listed));
  const tree = new Map<string, string>();
  if (errors.length === 0) for (const f of listed) tree.set(f.path, readFileSync(join(dir, f.path), 'utf8'));
  return { tree, errors };
}

/** `factoryd validate`, `plan`, `apply`, `factories add|remove|list`. */
export function registerFactoryCommands(program: Command): void {
  program
    .command('validate [dir]')
    .description(
      'Validate a factory folder: file:line: reason for each error; exit 1 on any. Team secrets and webhook UIDs are checked against a factoryd serve running on this DATA_DIR (--offline: the files only).',
    )
    .option('--team <name>', 'with a running service: the team whose secrets it checks', 'default')
    .option(
      '--factory <name>',
      'with a running service: the factory whose webhook UIDs it checks (default: factory.yaml’s name)',
    )
    .option('--offline', 'check the files only, even when a factoryd serve runs on this DATA_DIR')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nWhen a factoryd serve runs on this DATA_DIR (npm start in this folder), the team’s secrets and the\n' +
        'factory’s webhook UIDs are checked against its database too.\n' +
        '\nExample (a factory repository’s CI):\n  npx factoryd validate . --offline',
    )
    .action(
      async (
        dir: string | undefined,
        opts: { json?: boolean; team: string; factory?: string; offline?: boolean },
      ) => {
        const root = resolve(dir ?? '.');
        let folder: ReturnType<typeof readFolder>;
        try {
          folder = readFolder(root);
        } catch (err) {
          throw new Error(`cannot read ${root}: ${err instanceof Error ? err.message : String(err)}`, {
            cause: err,
          });
        }
        const { tree } = folder;
        const checks = await serviceChecksFor(tree, opts);
        const result = folder.errors.length
          ? { errors: folder.errors, skipped: [] }
          : loadDefinition(tree, new SchemaRegistry(), checks.context);
        if (opts.json) {
          print(opts, {
            valid: result.errors.length === 0,
            files: tree.size,
            errors: result.errors,
            skipped: result.skipped,
            checked_against: checks.checkedAgainst ?? null,
          });
        } else {
          if (checks.checkedAgainst)
            process.stdout.write(`checked against the running service: ${checks.checkedAgainst}\n`);
          for (const e of result.errors) process.stderr.write(`${formatError(e)}\n`);
          for (const s of result.skipped) process.stdout.write(`skipped: ${s}\n`);
          process.stdout.write(
            result.errors.length
              ? `${result.errors.length} error${result.errors.length === 1 ? '' : 's'} in ${root}\n`
              : `${root}: ${tree.size} definition files, valid\n`,
          );
        }
        if (result.errors.length) process.exitCode = 1;
      },
    );

  for (const [verb, description] of [
    ['plan', 'Show what the next reconcile would change (nothing is applied or recorded).'],
    ['apply', 'Reconcile now: apply the head of each factory’s production branch.'],
  ] as const) {
    program
      .command(verb)
      .description(description)
      .addHelpText('after', `\nExample:\n  npx factoryd ${verb} --factory example`)
      .option('--factory <name>', 'only this factory (default: all)')
      .option('--json', 'print JSON')
      .action((opts: { factory?: string; json?: boolean }) =>
        withServices(async (services) => {
          const reconciler = services.get(Reconciler);
          const factories = (await services.get(DefinitionStore).listAll()).filter(
            (f) => !opts.factory || f.name === opts.factory || f.uid === opts.factory,
          );
          if (opts.factory && factories.length === 0)
            throw new Error(`no factory ${opts.factory}; see \`${cliCommand('factories list')}\``);
          const outcomes: ReconcileOutcome[] = [];
          for (const f of factories)
            outcomes.push(
              verb === 'plan' ? await reconciler.plan(f.id) : await reconciler.request(f.id, true),
            );
          print(
            opts,
            {
              factories: outcomes.map((o) => ({
                name: o.factory.name,
                uid: o.factory.uid,
                revision: o.revision,
                result: o.result,
                errors: o.errors,
                plan: o.plan ?? null,
              })),
            },
            () =>
              outcomes.map(describeOutcome).join('\n\n') ||
              `No factories; add one with \`${cliCommand('factories add')}\`.`,
          );
          if (outcomes.some((o) => o.result === 'failed')) process.exitCode = 1;
        }),
      );
  }

  const factories = program
    .command('factories')
    .description('Factories: git repositories the service applies.')
    .addHelpText('after', '\nExample:\n  npx factoryd factories list');
  factories
    .command('add <name>')
    .description(
      'Register a factory: a repository the team commits to (--repo), or one factoryd owns and writes (--managed).',
    )
    .option(
      '--repo <urlOrPath>',
      'git URL (https://, ssh://, git://, user@host:path) or a local repository under FACTORY_REPO_ROOTS',
    )
    .option(
      '--managed',
      'factoryd creates and owns the repository (DATA_DIR/factories/teams/<team>/<name>); change it through the API',
    )
    .option('--branch <branch>', 'production branch', 'main')
    .option('--team <team>', 'team name or uid', 'default')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd factories add platform --repo https://github.com/acme/platform-factory.git --team platform\n  npx factoryd factories add support --managed',
    )
    .action(
      (
        name: string,
        opts: { repo?: string; managed?: boolean; branch: string; team: string; json?: boolean },
      ) =>
        withServices(async (services) => {
          if (Boolean(opts.repo) === Boolean(opts.managed))
            throw new Error('give either --repo URL_OR_PATH (a repository you commit to) or --managed');
          const team = await teamNamed(services, opts.team);
          const registrations = services.get(FactoryRegistrations);
          if (opts.managed) {
            const { factory: f, outcome } = await registrations.addManaged({
              team,
              name,
              branch: opts.branch,
              author: cliAuthor(),
            });
            print(
              opts,
              {
                uid: f.uid,
                name: f.name,
                team: team.name,
                branch: f.branch,
                managed: true,
                repository: f.repoUrl,
                result: outcome.result,
                errors: outcome.errors,
              },
              () =>
                `Created the managed factory ${f.name} (uid ${f.uid}) for team ${team.name} in ${f.repoUrl}: ${outcome.result}. Add a webhook: ${cliCommand(`webhooks create NAME --factory ${f.name}`)}`,
            );
            if (outcome.result === 'failed') process.exitCode = 1;
            return;
          }
          const {
            factory: f,
            repository,
            credentialsSecret: secret,
          } = await registrations.addRepository({ team, name, repository: opts.repo!, branch: opts.branch });
          print(
            opts,
            {
              uid: f.uid,
              name: f.name,
              team: team.name,
              branch: f.branch,
              repository,
              ...(secret && { credentials_secret: secret }),
            },
            () =>
              `Registered factory ${f.name} (uid ${f.uid}) for team ${team.name}; a running service applies it within FACTORY_POLL_SECONDS (or run \`${cliCommand(`apply --factory ${f.name}`)}\`).` +
              (secret
                ? ` The credentials in the URL are kept as the team secret ${secret} (encrypted; git gets them through a credential helper) and the URL without them: rotate them with ${setSecretCommand(secret, { team: team.name })}.`
                : ''),
          );
        }),
    );
  factories
    .command('remove <name>')
    .description(
      'Remove a factory: its webhooks (senders then get 404), automations, agents, skills and apply history; runs stay.',
    )
    .option('--team <team>', 'team name or uid', 'default')
    .option('--yes', 'a managed factory: delete its repository without asking')
    .option('--keep-repository', 'a managed factory: keep its repository in DATA_DIR')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nA repository the team commits to (--repo) is never touched. A managed factory’s repository is its\n' +
        'only copy: it is deleted too, once confirmed at a terminal or with --yes.\n' +
        '\nExamples:\n  npx factoryd factories remove platform --team platform\n  npx factoryd factories remove support --yes',
    )
    .action((name: string, opts: { team: string; yes?: boolean; keepRepository?: boolean; json?: boolean }) =>
      withServices(async (services) => {
        const team = await teamNamed(services, opts.team);
        const registrations = services.get(FactoryRegistrations);
        const removal = await registrations
          .findForRemoval(team, name, Boolean(opts.keepRepository))
          .catch((err: unknown) => {
            if (err instanceof NotFound)
              throw new Error(`${err.message}; see \`${cliCommand('factories list')}\``);
            throw err;
          });
        const { factory: f, repositoryToDelete: repository } = removal;
        if (
          repository &&
          !opts.yes &&
          !(await confirmed(`Delete ${repository}, the only copy of ${f.name}'s repository?`))
        )
          throw new Error(
            `${f.name} is a managed factory: removing it deletes its repository ${repository}. Nothing was removed; rerun with --yes, or with --keep-repository to keep the repository`,
          );
        const gone = await registrations.remove(removal);
        print(
          opts,
          {
            uid: f.uid,
            name: f.name,
            team: team.name,
            webhooks: gone.webhooks,
            automations: gone.automations,
            repository_deleted: repository ?? null,
          },
          () =>
            `Removed factory ${f.name} (uid ${f.uid}) of team ${team.name}: ${gone.webhooks} webhook${gone.webhooks === 1 ? '' : 's'} (senders now get 404) and ${gone.automations} automation${gone.automations === 1 ? '' : 's'} with it; its runs stay. ${
              repository
                ? `Deleted its repository ${repository}.`
                : f.managed
                  ? `Kept its repository ${f.repoUrl}.`
                  : `Its repository ${f.repoUrl} is untouched.`
            }`,
        );
      }),
    );
  factories
    .command('list')
    .description('List factories with their apply status.')
    .addHelpText('after', '\nExample:\n  npx factoryd factories list --json')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) =>
      withServices(async (services) => {
        const list = await services.get(DefinitionStore).listAll();
        const data = list.map((f: FactoryRecord) => ({
          uid: f.uid,
          name: f.name,
          team: f.teamName,
          branch: f.branch,
          ready: f.ready,
          reason: f.reason,
          last_applied_revision: f.lastAppliedRevision,
          last_attempted_revision: f.lastAttemptedRevision,
        }));
        print(opts, { factories: data }, () =>
          renderTable(
            ['NAME', 'UID', 'TEAM', 'BRANCH', 'READY', 'REASON', 'APPLIED', 'ATTEMPTED'],
            data.map((f) => [
              f.name,
              f.uid,
              f.team,
              f.branch,
              String(f.ready),
              f.reason,
              f.last_applied_revision?.slice(0, 12),
              f.last_attempted_revision?.slice(0, 12),
            ]),
          ),
        );
      }),
    );
}

function describeOutcome(o: ReconcileOutcome): string {
  const head = `${o.factory.name} @ ${o.revision?.slice(0, 12) ?? '?'}: ${o.result}`;
  if (o.errors.length)
    return [head, ...o.errors.map((e) => `  ${e.path ? formatError(e) : e.message}`)].join('\n');
  return [head, ...describePlan(o.plan)].join('\n');
}

function describePlan(plan: PlanSummary | undefined): string[] {
  if (!plan) return [];
  const lines: string[] = [];
  for (const [kind, k] of Object.entries(plan)) {
    for (const [mark, names] of [
      ['+', k.created],
      ['~', k.updated],
      ['-', k.deleted],
    ] as const) {
      for (const n of names) lines.push(`  ${mark} ${kind.replace(/s$/, '')} ${n}`);
    }
  }
  return lines.length ? lines : ['  no changes'];
}

/** Asks a yes/no question at a terminal; anything but a terminal is a no. */
async function confirmed(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await prompt.question(`${question} [y/N] `)).trim());
  } finally {
    prompt.close();
  }
}

/** The author of a managed factory's first commit made at the terminal: the user running the CLI. */
function cliAuthor(): Author {
  const user = userInfo().username || 'factoryd';
  return { name: user, email: `${user}@${hostname() || 'localhost'}` };
}
