import { bridgeAllowed, type BridgeEnvironment } from '../config/config.js';
import type { Database } from '../database/database.js';
import { bridgeRefused } from '../definitions/rules/environments.js';
import type { EnvironmentDefinition } from '../definitions/definition.js';
import type { SecretsService } from '../secrets/secrets.service.js';
import type { ResolvedEnvironment } from './resolved-environment.js';
import { setSecretCommand } from '../secrets/secret-commands.js';

export type { ResolvedEnvironment, ResolvedRepository } from './resolved-environment.js';

const COMMIT = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

type StoredConfig = Omit<EnvironmentDefinition, 'name' | 'path'>;

/** A run's environment as the worker gets it: the environment, and the values of the secrets it names. */
export type EnvironmentForRun =
  | { environment: ResolvedEnvironment; secretValues: Record<string, string> }
  /** It names a secret the team does not have: the run fails before anything starts. */
  | { environment: ResolvedEnvironment; problem: string };

/** The stored config of an environment in the shape every backend reads. */
function resolvedFrom(uid: string, name: string, c: StoredConfig): ResolvedEnvironment {
  return {
    uid,
    name,
    ...(c.dockerImage ? { docker_image: c.dockerImage } : {}),
    ...(c.network ? { network: c.network } : {}),
    repositories: (c.repositories ?? []).map((r) => ({
      url: r.url,
      path: r.path,
      ...(r.branch ? { branch: r.branch } : {}),
      ...(r.ref ? { ref: r.ref } : {}),
      ...(r.credentialSecret ? { credential_secret: r.credentialSecret } : {}),
      ...(r.username ? { username: r.username } : {}),
    })),
    setup_commands: c.setupCommands ?? [],
    env_vars: c.env ?? {},
    secrets: c.secrets ?? {},
  };
}

/**
 * Resolves the environment a run names (`environment_id`: an environment's uid, else its name) among
 * its own team's, with the current values of the secrets it names. Undefined when the team has no
 * such environment: such a run starts in an empty workspace, as runs did before environments existed.
 */
export class EnvironmentResolver {
  constructor(
    private readonly db: Database,
    private readonly secrets: Pick<SecretsService, 'current'>,
    /** WORKER_DOCKER_BRIDGE_ENVIRONMENTS: the only environments handed out with `network: bridge`. */
    private readonly bridgeEnvironments: readonly BridgeEnvironment[] = [],
  ) {}

  async forRun(teamId: string, environmentId: string | undefined): Promise<EnvironmentForRun | undefined> {
    if (!environmentId) return undefined;
    const [row] = await this.db.query<{ uid: string; name: string; config: StoredConfig; team: string }>(
      `SELECT e.uid, e.name, e.config, t.name AS team FROM environments e JOIN teams t ON t.id = e.team_id
        WHERE e.team_id = $1 AND (e.uid = $2 OR e.name = $2) ORDER BY e.uid = $2 DESC LIMIT 1`,
      [teamId, environmentId],
    );
    if (!row) return undefined;
    const environment = resolvedFrom(row.uid, row.name, row.config);
    // The second line behind the apply's check: an environment stored before the rule, or one the
    // operator has since taken off the list, never reaches a worker with the bridge.
    if (environment.network === 'bridge' && !bridgeAllowed(this.bridgeEnvironments, row.team, row.name))
      return { environment, problem: `The environment ${row.name}: ${bridgeRefused(row.name, row.team)}` };
    const names = new Set([
      ...environment.repositories.flatMap((r) => (r.credential_secret ? [r.credential_secret] : [])),
      ...Object.values(environment.secrets),
    ]);
    const secretValues: Record<string, string> = {};
    for (const name of names) {
      const secret = await this.secrets.current(teamId, name);
      if (!secret)
        return {
          environment,
          problem: `The environment ${environment.name} names the team secret "${name}", which does not exist: create it with ${setSecretCommand(name)}`,
        };
      secretValues[name] = secret.value;
    }
    return { environment, secretValues };
  }

  /** Records on the run the environment it runs in (at its claim), and later the commits checked out. */
  async record(runId: string, environment: ResolvedEnvironment): Promise<void> {
    await this.db.execute(`UPDATE runs SET environment = $2 WHERE id = $1`, [runId, environment]);
  }

  /** The commits a worker checked out, in the environment's order, onto the run it holds. */
  async recordCommits(runId: string, workerId: string, commits: string[]): Promise<void> {
    const [row] = await this.db.query<{ environment: ResolvedEnvironment | null }>(
      `SELECT environment FROM runs WHERE id = $1 AND lease_owner = $2`,
      [runId, workerId],
    );
    if (!row?.environment) return;
    const env = row.environment;
    env.repositories = env.repositories.map((r, i) =>
      COMMIT.test(commits[i] ?? '') ? { ...r, commit: commits[i] } : r,
    );
    await this.db.execute(`UPDATE runs SET environment = $2 WHERE id = $1 AND lease_owner = $3`, [
      runId,
      env,
      workerId,
    ]);
  }
}
