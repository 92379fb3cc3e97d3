import { Inject, Injectable, Logger } from '@nestjs/common';
import { ApiError, Conflict, expectedProblem, RequestInvalid } from '../common/problem.js';
import { formatError } from '../definitions/definition.js';
import { displayRepo } from '../factories/factory.presenter.js';
import { DefinitionStore, type FactoryRecord } from '../reconciler/definition-store.js';
import { Reconciler, type ReconcileOutcome } from '../reconciler/reconciler.js';
import { FactoryWriteLock } from './factory-write-lock.js';
import { ManagedRepositories, type Author, type FileChanges } from './managed-repositories.js';

/** What a managed factory starts with: enough to apply (a factory.yaml and its foreman). */
function initialFiles(name: string): FileChanges {
  return {
    'factory.yaml': [
      '# Managed by factoryd: change it through the management API or `factoryd webhooks …`;',
      '# every change is a commit in this repository, applied like any factory repository.',
      'schemaVersion: v1alpha1',
      `name: ${name}`,
      '',
    ].join('\n'),
    'agents/foreman/agent.md': [
      '---',
      'agentType: FOREMAN',
      'description: Runs what the factory’s webhooks and dispatches ask for',
      '---',
      '',
      `You are the foreman of the ${name} factory. Do what the request asks, and report what you did.`,
      '',
    ].join('\n'),
  };
}

/**
 * Managed factories: factoryd owns the git repository, and every management write is a commit there
 * (author = the caller) that the ordinary reconciler then applies — the same path as a team's own
 * commit to a repository-backed factory. A commit that does not apply is taken back, so the head is
 * always what is live.
 */
@Injectable()
export class ManagedFactories {
  private readonly log = new Logger('ManagedFactories');

  constructor(
    @Inject(ManagedRepositories) private readonly repos: ManagedRepositories,
    @Inject(Reconciler) private readonly reconciler: Reconciler,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(FactoryWriteLock) private readonly lock: FactoryWriteLock,
  ) {}

  /** A new managed factory: its repository (factory.yaml and a foreman), registered and applied. */
  async create(input: {
    team: { id: string; name: string };
    name: string;
    branch: string;
    author: Author;
  }): Promise<{ factory: FactoryRecord; outcome: ReconcileOutcome }> {
    const { team, name, branch } = input;
    if ((await this.store.listAll()).some((f) => f.teamId === team.id && f.name === name))
      throw new Conflict(`team ${team.name} already has a factory named ${name}`);
    const dir = this.repos.pathFor(team.name, name);
    await this.repos.init(
      dir,
      branch,
      initialFiles(name),
      input.author,
      `Create the managed factory ${name}`,
    );
    const factory = await this.store.register({ teamId: team.id, name, repoUrl: dir, branch, managed: true });
    if (!factory) throw new Conflict(`team ${team.name} already has a factory named ${name}`);
    return { factory, outcome: await this.reconciler.request(factory.id, true) };
  }

  /** Runs `work` as the only management write of this factory (across replicas). */
  exclusive<T>(factory: FactoryRecord, work: () => Promise<T>): Promise<T> {
    return this.lock.run(factory.id, work);
  }

  /** The content of a definition file at the head of a managed factory's branch. */
  read(factory: FactoryRecord, path: string): Promise<string | undefined> {
    return this.repos.read(factory.repoUrl, factory.branch, path);
  }

  /**
   * Commits `files` by `author` and applies the commit (awaited); the production branch takes the
   * commit only once it is live, so the head is always what is live and what callers were told. A
   * commit that does not apply stays off the branch, the head is reconciled again so the factory is
   * ready as before, and this throws: 400 with the apply's `file:line: reason` errors, 503 when the
   * database was lost meanwhile (the change may have reached it: the next reconcile of the head
   * takes it back), or a 500 for another failure of the service itself. Call inside `exclusive`. A
   * change that changes nothing commits nothing, unless `allowEmpty` (a secret change: the new
   * commit re-pins the factory's webhooks to current secrets). `undo` takes back what the caller
   * prepared for the change (a secret version) before the head applies again, so it never pins it.
   */
  async commit(
    factory: FactoryRecord,
    change: {
      author: Author;
      message: string;
      files: FileChanges;
      allowEmpty?: boolean;
      undo?: () => Promise<void>;
    },
  ): Promise<void> {
    const { repoUrl: dir, branch } = factory;
    let outcome: ReconcileOutcome;
    try {
      // A refused change (a path through a symlink: 409) takes back what was prepared for it too.
      const candidate = await this.repos.candidate(
        dir,
        branch,
        change.files,
        change.author,
        change.message,
        change.allowEmpty ?? false,
      );
      if (!candidate) return;
      outcome = await this.reconciler.applyCandidate(factory.id, candidate.commit, () =>
        this.repos.advance(dir, branch, candidate),
      );
    } catch (err) {
      await this.takeBack(factory, change.undo);
      throw err;
    }
    if (outcome.result !== 'failed') return;
    await this.takeBack(factory, change.undo);
    const located = outcome.errors.filter((e) => e.path);
    if (located.length) {
      throw new RequestInvalid(
        located.map((e) => ({
          path: `${e.path}:${e.line}`,
          message: `the change does not apply: ${formatError(e)}`,
        })),
      );
    }
    const unavailable = expectedProblem(outcome.cause);
    if (unavailable) throw unavailable;
    throw new ApiError(
      500,
      'internal_error',
      'Internal server error',
      `the change to factory ${factory.name} did not apply (${outcome.errors[0]?.message ?? 'unknown reason'}) and was undone; see GET /api/v1/factory/${factory.uid}/applies`,
      { retryable: true },
    );
  }

  /**
   * After a change that did not go live: the caller's `undo`, then the branch head applies again, so
   * the factory is ready as before and whatever of the change reached the database is undone. If the
   * database is away, the poll applies the head once it is back (its revision is not the last attempted).
   */
  private async takeBack(factory: FactoryRecord, undo?: () => Promise<void>): Promise<void> {
    await undo?.().catch((err: unknown) => this.log.warn({ err }, 'taking back a change failed'));
    await this.reconciler.request(factory.id, true).catch(() => undefined);
  }
}

/**
 * The 409 for a write to a repository-backed factory: its repository is the single source of truth,
 * so the change is a commit there (`action` says which).
 */
export function repositoryBacked(factory: FactoryRecord, action: string): Conflict {
  return new Conflict(
    `factory ${factory.name} is defined by the repository ${displayRepo(factory.repoUrl)} (branch ${factory.branch}), its single source of truth: ${action}. factoryd applies each new commit of ${factory.branch}.`,
  );
}
