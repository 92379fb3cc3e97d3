import type { Database } from '../database/database.js';
import type { EnvironmentDefinition } from '../definitions/definition.js';

/** An environment as stored: its file's content in definition shape (`config`), and where it comes from. */
export interface EnvironmentRow {
  uid: string;
  name: string;
  config: Omit<EnvironmentDefinition, 'name' | 'path'>;
  factory_id: string;
  factory_uid: string;
  factory_name: string;
  updated_at: Date;
  /** The newest run that named it (by uid or name) ended in a failed setup. */
  setup_failed: boolean;
}

const COLUMNS = `e.uid, e.name, e.config, e.factory_id, f.uid AS factory_uid, f.name AS factory_name, e.updated_at,
  coalesce((SELECT r.status_message->>'error_code' = 'environment_setup_failed' FROM runs r
             WHERE r.team_id = e.team_id AND r.environment_id IN (e.uid, e.name)
             ORDER BY r.created_at DESC LIMIT 1), false) AS setup_failed`;

/** The reads of a team's environments (the reconciler alone writes them). */
export class EnvironmentsRepository {
  constructor(private readonly db: Database) {}

  list(teamId: string): Promise<EnvironmentRow[]> {
    return this.db.query<EnvironmentRow>(
      `SELECT ${COLUMNS} FROM environments e JOIN factories f ON f.id = e.factory_id WHERE e.team_id = $1 ORDER BY e.name`,
      [teamId],
    );
  }

  /** The team's environment of this uid, else of this name. */
  async find(teamId: string, uidOrName: string): Promise<EnvironmentRow | undefined> {
    const [row] = await this.db.query<EnvironmentRow>(
      `SELECT ${COLUMNS} FROM environments e JOIN factories f ON f.id = e.factory_id
        WHERE e.team_id = $1 AND (e.uid = $2 OR e.name = $2) ORDER BY e.uid = $2 DESC LIMIT 1`,
      [teamId, uidOrName],
    );
    return row;
  }
}

/**
 * CloudEnvironment (the Oz clients' shape): `config` has the clients' fields (name, description,
 * docker_image, setup_commands) and factoryd's own (repositories, env_vars, secrets by name, network,
 * the factory and file that define it).
 */
export function presentEnvironment(e: EnvironmentRow, teamUid: string): Record<string, unknown> {
  const c = e.config;
  return {
    uid: e.uid,
    config: {
      name: e.name,
      ...(c.description !== undefined ? { description: c.description } : {}),
      ...(c.dockerImage ? { docker_image: c.dockerImage } : {}),
      setup_commands: c.setupCommands ?? [],
      repositories: (c.repositories ?? []).map((r) => ({
        url: r.url,
        path: r.path,
        ...(r.branch ? { branch: r.branch } : {}),
        ...(r.ref ? { ref: r.ref } : {}),
        ...(r.credentialSecret ? { credential_secret: r.credentialSecret } : {}),
        ...(r.username ? { username: r.username } : {}),
      })),
      env_vars: c.env ?? {},
      secrets: c.secrets ?? {},
      ...(c.network ? { network: c.network } : {}),
    },
    last_updated: e.updated_at.toISOString(),
    setup_failed: e.setup_failed,
    factory_uid: e.factory_uid,
    file: `environments/${e.name}.yaml`,
    scope: { type: 'Team', uid: teamUid },
  };
}
