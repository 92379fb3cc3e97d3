import { rmSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { Inject, Injectable, Module } from '@nestjs/common';
import { Conflict, InvalidRequest, NotFound } from '../common/problem.js';
import { CONFIG, type Config } from '../config/config.js';
import { FACTORY_NAME_PATTERN } from '../contract/generated.js';
import { ReconcilerModule } from '../reconciler/reconciler.module.js';
import { DefinitionStore, type FactoryRecord } from '../reconciler/definition-store.js';
import { GitSource } from '../reconciler/git-source.js';
import type { ReconcileOutcome } from '../reconciler/reconciler.js';
import { keepCredentials, splitCredentials } from '../reconciler/repository-credentials.js';
import { RepositoryPolicy } from '../reconciler/repository-policy.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { FactoryWriteLock } from './factory-write-lock.js';
import { ManagedFactories } from './managed-factories.js';
import { ManagedRepositories, type Author } from './managed-repositories.js';

const BRANCH_NAME = /^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]+$/;

type Team = { id: string; name: string };

/** A factory on a repository the team commits to, as registered. */
export interface RegisteredFactory {
  factory: FactoryRecord;
  /** The URL the factory reads, credentials taken out. */
  repository: string;
  /** The team secret that holds the URL's credentials, when it had some. */
  credentialsSecret?: string;
}

/** A factory found for removal, and the managed repository that goes with it (if it does). */
export interface FactoryRemoval {
  factory: FactoryRecord;
  team: Team;
  /** A managed factory's repository under DATA_DIR/factories, deleted with it; else undefined. */
  repositoryToDelete?: string;
}

/**
 * Adding and removing factories: the rules for a name, a branch, where a repository may be and what
 * happens to the credentials in its URL, and what a removal takes with it. `factoryd factories add`
 * and `remove`, and the first start's FACTORY_REPO, come through here.
 */
@Injectable()
export class FactoryRegistrations {
  private readonly policy: RepositoryPolicy;

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(SecretsService) private readonly secrets: SecretsService,
    @Inject(ManagedFactories) private readonly managed: ManagedFactories,
    @Inject(FactoryWriteLock) private readonly lock: FactoryWriteLock,
  ) {
    this.policy = new RepositoryPolicy(config, store);
  }

  /**
   * Registers a factory on `repository` (a git URL, or a local path resolved from here): checked by
   * the repository policy; credentials in the URL become a team secret, so neither the row nor git's
   * command line holds them. Applied by the next reconcile, not here.
   */
  async addRepository(input: {
    team: Team;
    name: string;
    repository: string;
    branch: string;
  }): Promise<RegisteredFactory> {
    const { team, name, branch } = input;
    checkNames(name, branch);
    const given = GitSource.isLocal(input.repository) ? resolve(input.repository) : input.repository;
    await this.policy.check(given, { teamId: team.id, teamName: team.name, name, managed: false });
    const split = splitCredentials(given);
    const repository = split?.url ?? given;
    const factory = await this.store.register({ teamId: team.id, name, repoUrl: repository, branch });
    if (!factory) throw new Conflict(`team ${team.name} already has a factory named ${name}`);
    const credentialsSecret = split
      ? await keepCredentials({ store: this.store, secrets: this.secrets }, factory, split)
      : undefined;
    return { factory, repository, ...(credentialsSecret && { credentialsSecret }) };
  }

  /** A factory whose repository factoryd creates and owns, registered and applied. */
  async addManaged(input: {
    team: Team;
    name: string;
    branch: string;
    author: Author;
  }): Promise<{ factory: FactoryRecord; outcome: ReconcileOutcome }> {
    checkNames(input.name, input.branch);
    return this.managed.create(input);
  }

  /**
   * The team's factory `nameOrUid`, and the repository its removal deletes: a managed factory's
   * (its only copy) unless `keepRepository`. Nothing is removed yet: the caller may ask first.
   */
  async findForRemoval(team: Team, nameOrUid: string, keepRepository: boolean): Promise<FactoryRemoval> {
    const factory = (await this.store.listAll()).find(
      (f) => f.teamId === team.id && (f.name === nameOrUid || f.uid === nameOrUid),
    );
    if (!factory) throw new NotFound(`team ${team.name} has no factory ${nameOrUid}`);
    const repositoryToDelete =
      factory.managed && !keepRepository ? this.managedRepositoryOf(factory) : undefined;
    return { factory, team, ...(repositoryToDelete && { repositoryToDelete }) };
  }

  /** Removes the factory with its webhooks, automations, agents and apply history (its runs stay). */
  async remove(removal: FactoryRemoval): Promise<{ webhooks: number; automations: number }> {
    // Not while a management write (of any replica) is committing to the repository.
    return this.lock.run(removal.factory.id, async () => {
      const counts = await this.store.remove(removal.factory.id);
      if (removal.repositoryToDelete) rmSync(removal.repositoryToDelete, { recursive: true, force: true });
      return counts;
    });
  }

  /** A managed factory's repository, to delete with it: only ever a folder under DATA_DIR/factories. */
  private managedRepositoryOf(f: FactoryRecord): string {
    const root = join(resolve(this.config.dataDir), 'factories');
    const repository = resolve(f.repoUrl);
    if (!repository.startsWith(`${root}${sep}`))
      throw new Conflict(
        `${f.name}'s repository ${repository} is not under ${root}: keep the repository (and delete it yourself)`,
      );
    return repository;
  }
}

function checkNames(name: string, branch: string): void {
  if (!FACTORY_NAME_PATTERN.test(name))
    throw new InvalidRequest('a factory name is 1-64 letters, digits, ".", "_", "-"');
  if (!BRANCH_NAME.test(branch)) throw new InvalidRequest(`"${branch}" is not a valid branch name`);
}

/** Registering and removing factories, and the managed repositories: the API's and the CLI's. */
@Module({
  imports: [ReconcilerModule, SecretsModule],
  providers: [ManagedRepositories, FactoryWriteLock, ManagedFactories, FactoryRegistrations],
  exports: [ManagedRepositories, FactoryWriteLock, ManagedFactories, FactoryRegistrations],
})
export class FactoryRegistrationsModule {}
