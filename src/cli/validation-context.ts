import { AuthRepository } from '../auth/auth.repository.js';
import { dataDirOf } from '../config/config.js';
import { Database } from '../database/database.js';
import { SourceFile } from '../definitions/source-file.js';
import { isUrlSafe, type ValidationContext } from '../definitions/validate-definition.js';
import { DefinitionStore } from '../reconciler/definition-store.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { withServices } from './context.js';
import { findLocalService } from './local-service.js';
import { cliCommand } from '../common/cli-command.js';

export interface ServiceChecks {
  context: ValidationContext;
  /** What the folder was checked against, when it was: e.g. `team default, factory example`. */
  checkedAgainst?: string;
}

/**
 * What `factoryd validate` checks beyond the files when a `factoryd serve` runs on this DATA_DIR: the
 * team's secrets and the factory's webhook UIDs, from that service's database. Otherwise, why not and
 * how to have them checked.
 */
export async function serviceChecksFor(
  tree: Map<string, string>,
  opts: { team?: string; factory?: string; offline?: boolean },
): Promise<ServiceChecks> {
  if (opts.offline) return { context: { uncheckedBecause: 'offline (--offline)' } };
  const dataDir = dataDirOf();
  const local = findLocalService(dataDir);
  if (!local)
    return {
      context: {
        uncheckedBecause: `no factoryd serve runs on ${dataDir} (start it in this folder, or set DATA_DIR to its folder)`,
      },
    };
  if (local.database === 'DATABASE_URL' && !process.env.DATABASE_URL)
    return {
      context: {
        uncheckedBecause: `the factoryd serve at ${local.url} uses DATABASE_URL: set the same DATABASE_URL here`,
      },
    };
  return withServices(async (services) => {
    const teamName = opts.team ?? 'default';
    const team = await services.get(AuthRepository).findTeamByName(teamName);
    if (!team)
      return { context: { uncheckedBecause: `the running service has no team ${teamName} (--team NAME)` } };
    const store = services.get(DefinitionStore);
    const secrets = services.get(SecretsService);
    const current = new Map<string, { urlSafe: boolean }>();
    for (const { name } of await secrets.list(team.id)) {
      const value = (await secrets.current(team.id, name))?.value;
      if (value !== undefined) current.set(name, { urlSafe: isUrlSafe(value) });
    }
    const context: ValidationContext = { secrets: current, team: team.name };

    const named = opts.factory !== undefined ? { name: opts.factory, why: '' } : factoryNameIn(tree);
    if (named.name === undefined) {
      context.uncheckedBecause = `${named.why}, so the factory to check against is unknown: name it with --factory NAME`;
      return { context, checkedAgainst: `team ${team.name}` };
    }
    const factoryName = named.name;
    const factory = (await store.listAll()).find((f) => f.teamId === team.id && f.name === factoryName);
    if (!factory) {
      context.uncheckedBecause = `team ${team.name} has no factory named ${factoryName} (\`${cliCommand('factories list')}\`; --factory NAME names another)`;
      return { context, checkedAgainst: `team ${team.name}` };
    }
    const applied = await services.get(Database).transaction((tx) => store.appliedState(tx, factory.id));
    context.knownWebhooks = applied.webhooks.map((w) => ({
      uid: w.uid,
      name: w.name,
      path: w.path,
      deleted: w.deleted,
    }));
    return { context, checkedAgainst: `team ${team.name}, factory ${factory.name}` };
  });
}

/** factory.yaml's name, read as the validation reads it; else why there is none. */
function factoryNameIn(tree: Map<string, string>): { name?: string; why: string } {
  const text = tree.get('factory.yaml');
  if (text === undefined) return { why: 'the folder has no factory.yaml' };
  const file = SourceFile.yaml('factory.yaml', text);
  const name = (file.data as { name?: unknown } | undefined)?.name;
  if (typeof name === 'string') return { name, why: '' };
  return {
    why: file.errors.length ? 'factory.yaml cannot be read (its error is above)' : 'factory.yaml has no name',
  };
}
