import { Inject, Injectable } from '@nestjs/common';
import { stringify } from 'yaml';
import type { AuthContext } from '../auth/auth-context.js';
import { Conflict, invalidParam, NotFound } from '../common/problem.js';
import { nameProblem } from '../definitions/definition-file.js';
import { EnvironmentsRepository, presentEnvironment } from '../environments/environments.repository.js';
import { FactoriesService } from '../factories/factories.service.js';
import { DefinitionStore, type FactoryRecord } from '../reconciler/definition-store.js';
import { ManagedFactories, repositoryBacked } from './managed-factories.js';
import { authorOf } from './managed-repositories.js';
import { cliCommand } from '../common/cli-command.js';

/** POST/PUT /agent/environments bodies (schemas/api/environment-request.schema.json). */
export interface EnvironmentRequest {
  name?: string;
  factory_uid?: string;
  description?: string | null;
  docker_image?: string | null;
  network?: 'bridge' | 'none' | null;
  github_repos?: Array<{ owner: string; repo: string }>;
  repositories?: Array<{
    url: string;
    branch?: string;
    ref?: string;
    path?: string;
    credential_secret?: string;
    username?: string;
  }>;
  setup_commands?: string[];
  env_vars?: Record<string, string>;
  secrets?: Record<string, string>;
}

/** environments/<name>.yaml for a request: the file's own spelling, absent fields left out. */
function environmentFile(req: EnvironmentRequest): string {
  const repositories = [
    ...(req.github_repos ?? []).map((g) => ({ url: `https://github.com/${g.owner}/${g.repo}.git` })),
    ...(req.repositories ?? []).map((r) => ({
      url: r.url,
      ...(r.branch ? { branch: r.branch } : {}),
      ...(r.ref ? { ref: r.ref } : {}),
      ...(r.path ? { path: r.path } : {}),
      ...(r.credential_secret ? { credentialSecret: r.credential_secret } : {}),
      ...(r.username ? { username: r.username } : {}),
    })),
  ];
  const file = {
    ...(req.description ? { description: req.description } : {}),
    ...(req.docker_image ? { dockerImage: req.docker_image } : {}),
    ...(req.network ? { network: req.network } : {}),
    ...(repositories.length ? { repositories } : {}),
    ...(req.setup_commands?.length ? { setupCommands: req.setup_commands } : {}),
    ...(req.env_vars && Object.keys(req.env_vars).length ? { env: req.env_vars } : {}),
    ...(req.secrets && Object.keys(req.secrets).length ? { secrets: req.secrets } : {}),
  };
  const header = '# Managed by factoryd: written by the environments API (docs/environments.md).\n';
  return header + (Object.keys(file).length ? stringify(file) : '{}\n');
}

/**
 * The environments API's writes: in a managed factory, a commit of environments/<name>.yaml (author:
 * the caller) applied by the reconciler before the answer; a repository-backed factory's is 409,
 * naming the file to commit there.
 */
@Injectable()
export class EnvironmentManagement {
  constructor(
    @Inject(EnvironmentsRepository) private readonly environments: EnvironmentsRepository,
    @Inject(FactoriesService) private readonly factories: FactoriesService,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(ManagedFactories) private readonly managed: ManagedFactories,
  ) {}

  async create(auth: AuthContext, req: EnvironmentRequest) {
    const name = req.name ?? '';
    const badName = nameProblem(name);
    if (badName) throw invalidParam('name', `name: ${badName}`);
    const factory = await this.factoryFor(auth, req.factory_uid);
    const path = `environments/${name}.yaml`;
    if (!factory.managed) throw repositoryBacked(factory, `add ${path} there and commit it`);
    await this.managed.exclusive(factory, async () => {
      const taken = await this.environments.find(auth.team.id, name);
      if (taken?.name === name)
        throw new Conflict(
          `your team already has an environment named ${name} (uid ${taken.uid}, in factory ${taken.factory_name}): choose another name, or change that one with PUT /api/v1/agent/environments/${taken.uid}`,
        );
      await this.managed.commit(factory, {
        author: authorOf(auth.principal),
        message: `Create the environment ${name}`,
        files: { [path]: environmentFile(req) },
      });
    });
    return this.present(auth, name);
  }

  async replace(auth: AuthContext, uid: string, req: EnvironmentRequest) {
    const { env, factory } = await this.existing(auth, uid);
    if (req.name !== undefined && req.name !== env.name)
      throw invalidParam('name', `an environment is not renamed: create ${req.name} and delete ${env.name}`);
    if (req.factory_uid !== undefined && req.factory_uid !== factory.uid)
      throw invalidParam('factory_uid', `an environment does not move between factories`);
    const path = `environments/${env.name}.yaml`;
    if (!factory.managed) throw repositoryBacked(factory, `change ${path} there and commit it`);
    await this.managed.exclusive(factory, () =>
      this.managed.commit(factory, {
        author: authorOf(auth.principal),
        message: `Change the environment ${env.name}`,
        files: { [path]: environmentFile(req) },
      }),
    );
    return this.present(auth, env.name);
  }

  async remove(auth: AuthContext, uid: string): Promise<void> {
    const { env, factory } = await this.existing(auth, uid);
    const path = `environments/${env.name}.yaml`;
    if (!factory.managed) throw repositoryBacked(factory, `remove ${path} there and commit it`);
    await this.managed.exclusive(factory, () =>
      this.managed.commit(factory, {
        author: authorOf(auth.principal),
        message: `Remove the environment ${env.name}`,
        files: { [path]: null },
      }),
    );
  }

  private async existing(auth: AuthContext, uid: string) {
    const env = await this.environments.find(auth.team.id, uid);
    if (!env) throw new NotFound(`your team has no environment ${uid}; see GET /api/v1/agent/environments`);
    return { env, factory: (await this.store.find(env.factory_id))! };
  }

  /** The factory named, else the team's one managed factory. */
  private async factoryFor(auth: AuthContext, uid: string | undefined): Promise<FactoryRecord> {
    if (uid) return this.factories.get(auth, uid);
    const managed = (await this.store.listAll()).filter((f) => f.teamId === auth.team.id && f.managed);
    if (managed.length === 1) return managed[0]!;
    throw invalidParam(
      'factory_uid',
      managed.length
        ? `your team has ${managed.length} managed factories: give factory_uid to say which holds the environment`
        : `your team has no managed factory: give factory_uid (a repository-backed factory answers with the file to commit), or create one with \`${cliCommand('factories add NAME --managed')}\``,
    );
  }

  private async present(auth: AuthContext, name: string) {
    const env = await this.environments.find(auth.team.id, name);
    if (!env) throw new NotFound(`the environment ${name} is not live`);
    return presentEnvironment(env, auth.team.uid);
  }
}
