import type { Command } from 'commander';
import { SECRET_KINDS, type SecretKind } from '../../secrets/secret-generator.js';
import { SecretsService } from '../../secrets/secrets.service.js';
import { teamNamed, withServices } from '../context.js';
import { print, renderTable } from '../output.js';
import { readSecret } from '../stdin.js';

/** `factoryd secrets set|list`: team secrets; values go in, never come out (except a generated one, once). */
export function registerSecretsCommands(program: Command): void {
  const secrets = program
    .command('secrets')
    .description('Team secrets that webhooks name (AES-256-GCM at rest).')
    .addHelpText('after', '\nExample:\n  npx factoryd secrets set pager-token --generate url-safe');
  secrets
    .command('set <name>')
    .description(
      'Set a team secret: typed at the prompt (not shown), piped on stdin, or generated (printed once). Webhooks pick it up on the next applied change.',
    )
    .option('--team <team>', 'team name or uid', 'default')
    .option('--generate <kind>', `generate the value: ${SECRET_KINDS.join(' | ')}`)
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  npx factoryd secrets set anthropic-api-key        # asks for the value\n  printf %s "$GITHUB_WEBHOOK_SECRET" | npx factoryd secrets set github-webhook\n  npx factoryd secrets set pager-token --generate url-safe',
    )
    .action((name: string, opts: { team: string; generate?: string; json?: boolean }) =>
      withServices(async (services) => {
        if (opts.generate !== undefined && !(SECRET_KINDS as readonly string[]).includes(opts.generate)) {
          throw new Error(`--generate must be one of ${SECRET_KINDS.join(', ')}`);
        }
        const team = await teamNamed(services, opts.team);
        const service = services.get(SecretsService);
        if (opts.generate) {
          const { value, ref } = await service.generate(team.id, name, opts.generate as SecretKind);
          print(opts, { name, team: team.name, version: ref.version, value }, () =>
            [
              `Secret ${name} of team ${team.name}, version ${ref.version} (shown only this once):`,
              '',
              `  ${value}`,
            ].join('\n'),
          );
          return;
        }
        const ref = await service.set(team.id, name, await readSecret(`the value of ${name}`));
        print(
          opts,
          { name, team: team.name, version: ref.version },
          () => `Set secret ${name} of team ${team.name} (version ${ref.version}).`,
        );
      }),
    );
  secrets
    .command('list')
    .description('List team secrets with their versions (never their values).')
    .addHelpText('after', '\nExample:\n  npx factoryd secrets list --team default')
    .option('--team <team>', 'team name or uid', 'default')
    .option('--json', 'print JSON')
    .action((opts: { team: string; json?: boolean }) =>
      withServices(async (services) => {
        const team = await teamNamed(services, opts.team);
        const list = await services.get(SecretsService).list(team.id);
        const data = list.map((s) => ({
          name: s.name,
          version: s.current_version,
          updated_at: s.updated_at.toISOString(),
        }));
        print(opts, { team: team.name, secrets: data }, () =>
          renderTable(
            ['NAME', 'VERSION', 'UPDATED'],
            data.map((s) => [s.name, s.version, s.updated_at]),
          ),
        );
      }),
    );
}
