import type { Command } from 'commander';
import { HARNESS_TYPES, isHarnessType } from '../../harnesses/harness-types.js';
import { isProvider, parseBaseUrl, PROVIDERS, untrustedInternalBaseUrl } from '../../harnesses/base-url.js';
import { parseScopes } from '../../auth/api-key.js';
import { AuthRepository } from '../../auth/auth.repository.js';
import { AuthService } from '../../auth/auth.service.js';
import { teamNamed, withServices } from '../context.js';
import { print, renderTable } from '../output.js';

/** `factoryd teams …` and `factoryd api-keys …`. */
export function registerAuthCommands(program: Command): void {
  const teams = program
    .command('teams')
    .description('Teams own runs, factories, secrets and API keys.')
    .addHelpText('after', '\nExample:\n  npx factoryd teams list');
  teams
    .command('create <name>')
    .description('Create a team.')
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  npx factoryd teams create platform')
    .action((name: string, opts: { json?: boolean }) =>
      withServices(async (services) => {
        const team = await services.get(AuthService).createTeam(name);
        print(opts, { uid: team.uid, name: team.name }, () => `Created team ${team.name} (uid ${team.uid}).`);
      }),
    );
  teams
    .command('list')
    .description('List teams with their uids (for X-Team-Uid and --team).')
    .addHelpText('after', '\nExample:\n  npx factoryd teams list --json')
    .option('--json', 'print JSON')
    .action((opts: { json?: boolean }) =>
      withServices(async (services) => {
        const list = await services.get(AuthRepository).listTeams();
        const data = list.map((t) => ({
          uid: t.uid,
          name: t.name,
          created_at: t.created_at.toISOString(),
          harness_command: t.harness_command,
          harness_type: t.harness_type ?? 'oz',
          max_slots: t.max_slots,
          base_urls: t.harness_base_urls ?? {},
        }));
        print(opts, { teams: data }, () =>
          renderTable(
            ['NAME', 'UID', 'CREATED', 'HARNESS', 'MAX SLOTS'],
            data.map((t) => [
              t.name,
              t.uid,
              t.created_at,
              t.harness_type !== 'oz' ? t.harness_type : (t.harness_command ?? '(HARNESS_COMMAND)'),
              t.max_slots === null ? '(TEAM_MAX_SLOTS)' : String(t.max_slots),
            ]),
          ),
        );
      }),
    );
  teams
    .command('set-harness <team> [command...]')
    .description(
      "Set the agent harness the service-hosted workers start for this team's runs (a shell command line, " +
        'like HARNESS_COMMAND, which it overrides). Self-hosted workers keep their own HARNESS_COMMAND.',
    )
    .option('--default', "go back to the environment's HARNESS_COMMAND (and to harness type oz)")
    .option(
      '--type <type>',
      `the team's default harness for runs that name none: ${HARNESS_TYPES.join(', ')} (docs/harnesses.md)`,
    )
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd teams set-harness platform -- node /opt/agents/claude-code.js --model sonnet\n' +
        '  npx factoryd teams set-harness platform --type claude\n' +
        '  npx factoryd teams set-harness platform --default',
    )
    .action((name: string, words: string[], opts: { default?: boolean; type?: string; json?: boolean }) => {
      // Bad input is answered before a database is opened.
      if (opts.type !== undefined && !isHarnessType(opts.type))
        throw new Error(`--type must be one of ${HARNESS_TYPES.join(', ')}, got "${opts.type}"`);
      return withServices(async (services) => {
        const repo = services.get(AuthRepository);
        const team = await teamNamed(services, name);
        if (opts.type !== undefined && !words.length && !opts.default) {
          await repo.setHarnessType(team.id, opts.type === 'oz' ? null : opts.type);
          print(
            opts,
            { name: team.name, harness_type: opts.type },
            () => `Team ${team.name}'s runs that name no harness run on: ${opts.type}`,
          );
          return;
        }
        const command = harnessCommand(words, opts.default);
        if (opts.default || opts.type !== undefined)
          await repo.setHarnessType(team.id, opts.type && opts.type !== 'oz' ? opts.type : null);
        await repo.setHarnessCommand(team.id, command);
        print(opts, { name: team.name, harness_command: command }, () =>
          command === null
            ? `Team ${team.name} runs the environment's HARNESS_COMMAND.`
            : `Team ${team.name} runs: ${command}`,
        );
      });
    });

  teams
    .command('set-base-url <team> [url]')
    .description(
      "Set the team's own base URL for one model provider (a gateway, a compatible provider), overriding the " +
        "operator's ANTHROPIC_BASE_URL, OPENAI_BASE_URL or GOOGLE_GEMINI_BASE_URL for that provider's harnesses " +
        "in the team's runs. Loopback and private addresses only where HARNESS_EGRESS_TRUST allows them.",
    )
    .requiredOption('--provider <provider>', `the provider: ${PROVIDERS.join(', ')}`)
    .option('--default', "go back to the operator's base URL for the provider")
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd teams set-base-url platform --provider anthropic https://gateway.example.com/anthropic\n' +
        '  npx factoryd teams set-base-url platform --provider anthropic --default',
    )
    .action(
      (
        name: string,
        url: string | undefined,
        opts: { provider: string; default?: boolean; json?: boolean },
      ) => {
        // Bad input is answered before a database is opened.
        if (!isProvider(opts.provider))
          throw new Error(`--provider must be one of ${PROVIDERS.join(', ')}, got "${opts.provider}"`);
        const provider = opts.provider;
        if (opts.default && url !== undefined)
          throw new Error('give either a base URL or --default, not both');
        if (!opts.default && url === undefined)
          throw new Error(
            "give the base URL, e.g. `teams set-base-url TEAM --provider anthropic https://gateway.example.com`, or --default for the operator's",
          );
        const value = url === undefined ? null : parseBaseUrl(url);
        return withServices(async (services, config) => {
          if (value !== null) {
            const why = untrustedInternalBaseUrl(value, config.harnessEgress?.trusted ?? []);
            if (why) throw new Error(why);
          }
          const team = await teamNamed(services, name);
          const urls = await services.get(AuthRepository).setHarnessBaseUrl(team.id, provider, value);
          print(opts, { name: team.name, provider, base_url: value, base_urls: urls }, () =>
            value === null
              ? `Team ${team.name}'s ${provider} harnesses use the operator's base URL.`
              : `Team ${team.name}'s ${provider} harnesses use: ${value}`,
          );
        });
      },
    );

  teams
    .command('set-slots <team> [slots]')
    .description(
      "Set how many service-hosted worker slots this team's runs may hold at once (across every replica), " +
        'overriding TEAM_MAX_SLOTS. Runs over the cap wait while the team holds that many.',
    )
    .option('--default', "go back to the environment's TEAM_MAX_SLOTS")
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd teams set-slots platform 4\n  npx factoryd teams set-slots platform --default',
    )
    .action((name: string, slots: string | undefined, opts: { default?: boolean; json?: boolean }) => {
      // Bad input is answered before a database is opened.
      const max = maxSlots(slots, opts.default);
      return withServices(async (services) => {
        const team = await teamNamed(services, name);
        await services.get(AuthRepository).setMaxSlots(team.id, max);
        print(opts, { name: team.name, max_slots: max }, () =>
          max === null
            ? `Team ${team.name} may hold the environment's TEAM_MAX_SLOTS service-hosted slots.`
            : `Team ${team.name} may hold at most ${max} service-hosted slot(s) at once.`,
        );
      });
    });

  const keys = program
    .command('api-keys')
    .description('API keys: stored hashed, shown once.')
    .addHelpText(
      'after',
      '\nExample:\n  npx factoryd api-keys create --team default --scopes runs:read,runs:write',
    );
  keys
    .command('create')
    .description('Create a service-account API key in one or more teams; prints the key once.')
    .requiredOption('--team <team...>', 'team name or uid (repeat for several)')
    .option(
      '--scopes <list>',
      'comma-separated: runs:read, runs:write, factory:manage; or workers alone (with --worker-host)',
      'runs:read,runs:write',
    )
    .option('--worker-host <id>', 'for --scopes workers: the one self-hosted worker host the key serves')
    .option('--name <name>', 'who the key is for (shown as the run creator)', 'api-key')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd api-keys create --team default --scopes runs:read,runs:write,factory:manage --name ci\n' +
        '  npx factoryd api-keys create --team default --scopes workers --worker-host build-box --name build-box',
    )
    .action((opts: { team: string[]; scopes: string; name: string; workerHost?: string; json?: boolean }) =>
      withServices(async (services) => {
        const auth = services.get(AuthService);
        const scopes = parseScopes(opts.scopes);
        const teamRefs: Array<{ id: string; uid: string; name: string }> = [];
        for (const t of opts.team) {
          const team = await teamNamed(services, t);
          teamRefs.push(team);
        }
        const created = await auth.createApiKey({
          teams: teamRefs,
          scopes,
          name: opts.name,
          workerHost: opts.workerHost,
        });
        print(
          opts,
          {
            id: created.id,
            key: created.key,
            prefix: created.prefix,
            scopes,
            worker_host: opts.workerHost ?? null,
            teams: teamRefs.map((t) => t.name),
          },
          () =>
            [
              `API key ${created.id} (${scopes.join(', ')}${opts.workerHost ? ` for worker host ${opts.workerHost}` : ''}) for ${teamRefs.map((t) => t.name).join(', ')}:`,
              '',
              `  ${created.key}`,
              '',
              'It is shown only this once.',
            ].join('\n'),
        );
      }),
    );
  keys
    .command('list')
    .description('List API keys (never their values).')
    .addHelpText('after', '\nExample:\n  npx factoryd api-keys list --team default')
    .option('--team <team>', 'only keys of this team')
    .option('--json', 'print JSON')
    .action((opts: { team?: string; json?: boolean }) =>
      withServices(async (services) => {
        const repo = services.get(AuthRepository);
        const team = opts.team ? await repo.findTeam(opts.team) : undefined;
        if (opts.team && !team) throw new Error(`no team ${opts.team}`);
        const list = await repo.listKeys(team?.id);
        const data = list.map((k) => ({
          ...k,
          created_at: k.created_at.toISOString(),
          last_used_at: k.last_used_at?.toISOString() ?? null,
          revoked_at: k.revoked_at?.toISOString() ?? null,
        }));
        print(opts, { api_keys: data }, () =>
          renderTable(
            ['ID', 'NAME', 'PREFIX', 'SCOPES', 'WORKER HOST', 'TEAMS', 'LAST USED', 'REVOKED'],
            data.map((k) => [
              k.id,
              k.name,
              `${k.prefix}…`,
              k.scopes.join(','),
              k.worker_host,
              k.teams.join(','),
              k.last_used_at,
              k.revoked_at,
            ]),
          ),
        );
      }),
    );
  keys
    .command('revoke <id>')
    .description(
      'Revoke an API key: running services refuse it (401) within API_KEY_CACHE_SECONDS (10 s by default).',
    )
    .addHelpText('after', '\nExample:\n  npx factoryd api-keys revoke 3b0c…   # the ID from `api-keys list`')
    .option('--json', 'print JSON')
    .action((id: string, opts: { json?: boolean }) =>
      withServices(async (services) => {
        if (!(await services.get(AuthRepository).revokeKey(id)))
          throw new Error(`no live API key ${id}; see \`factoryd api-keys list\``);
        print(
          opts,
          { id, revoked: true },
          () =>
            `Revoked API key ${id}. Running services refuse it within API_KEY_CACHE_SECONDS (10 s by default), the time they trust a key they verified.`,
        );
      }),
    );
}

/** `set-slots`' argument: a whole number of slots, or null with --default. */
function maxSlots(slots: string | undefined, useDefault: boolean | undefined): number | null {
  if (useDefault) {
    if (slots !== undefined) throw new Error('give either a number of slots or --default, not both');
    return null;
  }
  if (slots === undefined || !/^\d+$/.test(slots) || Number(slots) < 1 || Number(slots) > 10_000)
    throw new Error(
      `give the number of slots, a whole number from 1 to 10000 (got ${slots === undefined ? 'none' : `"${slots}"`}), or --default`,
    );
  return Number(slots);
}

/** The words after `--`, joined as one shell command line (as ssh does); null with --default. */
function harnessCommand(words: string[], useDefault: boolean | undefined): string | null {
  const command = words.join(' ').trim();
  if (useDefault) {
    if (command) throw new Error('give either a command or --default, not both');
    return null;
  }
  if (!command)
    throw new Error(
      "give the harness command after --, e.g. `teams set-harness TEAM -- node agent.js`, or --default for the environment's",
    );
  if (command.length > 4096 || command.includes('\0'))
    throw new Error('the harness command must be at most 4096 characters, without NUL');
  return command;
}
