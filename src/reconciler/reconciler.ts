import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { SchemaRegistry } from '../common/schema-validator.js';
import { CONFIG, type Config } from '../config/config.js';
import { isDatabaseUnreachable } from '../common/problem.js';
import type { Queryable } from '../database/database.js';
import { formatError, type DefinitionError } from '../definitions/definition.js';
import { parseDefinitionFile, placementOf, type DefinitionFile } from '../definitions/definition-file.js';
import { checkTreeLimits } from '../definitions/definition-limits.js';
import { ParsedFileCache } from '../definitions/parsed-file-cache.js';
import {
  isUrlSafe,
  parseTree,
  validateDefinition,
  type ValidationResult,
} from '../definitions/validate-definition.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { DefinitionStore, type ApplyRecord, type FactoryRecord } from './definition-store.js';
import { GitStopped, GitRunner } from './git-runner.js';
import { GitSource, type ListedBlob } from './git-source.js';
import { isEmpty, planChanges, summarize, type PlanSummary } from './plan.js';
import { RepositoryPolicy, RepositoryRefused } from './repository-policy.js';

export interface ReconcileOutcome {
  /**
   * `noop`: the head was already attempted (by this or another replica); nothing recorded.
   * `planned`: a dry run (`plan`) that changed and recorded nothing.
   */
  result: 'applied' | 'failed' | 'unchanged' | 'noop' | 'planned';
  revision: string | null;
  errors: DefinitionError[];
  factory: FactoryRecord;
  /** What the apply changed (or, for a dry run, would change). */
  plan?: PlanSummary;
  /** Why a `failed` apply failed when the service failed (not the definition): the error itself. */
  cause?: unknown;
}

/**
 * Keeps PostgreSQL equal to the head of each factory's production branch, one whole commit at a time:
 * source (fetch) → load + validate → plan → apply in one transaction under a per-factory advisory lock
 * → record. A bad commit leaves the last good revision live and is recorded as failed with every error.
 * Polls, the ref watch and "refresh now" all go through `request`, one reconcile per factory at a time.
 */
@Injectable()
export class Reconciler {
  private readonly log = new Logger('Reconciler');
  private readonly source: GitSource;
  private readonly policy: RepositoryPolicy;
  /** Parsed files by blob id and path, shared by every factory of the process: 32 MiB at most. */
  readonly parsed = new ParsedFileCache(32 * 1024 * 1024);
  private readonly queues = new Map<
    string,
    { tail: Promise<unknown>; waiting?: { force: boolean; promise: Promise<ReconcileOutcome> } }
  >();

  constructor(
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(SecretsService) private readonly secrets: SecretsService,
    @Inject(SchemaRegistry) private readonly schemas: SchemaRegistry,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(CONFIG) config: Config,
    @Inject(GitRunner) git: GitRunner,
  ) {
    this.source = new GitSource(config.dataDir, git);
    this.policy = new RepositoryPolicy(config, store);
  }

  /**
   * Queues a reconcile of the factory. Requests that arrive while one waits join it (`force` sticks),
   * so a burst of pushes and polls costs one reconcile after the running one.
   */
  request(factoryId: string, force = false): Promise<ReconcileOutcome> {
    const q = this.queues.get(factoryId) ?? { tail: Promise.resolve() };
    this.queues.set(factoryId, q);
    if (q.waiting) {
      q.waiting.force ||= force;
      return q.waiting.promise;
    }
    const waiting: { force: boolean; promise: Promise<ReconcileOutcome> } = { force, promise: undefined! };
    waiting.promise = q.tail.then(() => {
      if (q.waiting === waiting) q.waiting = undefined;
      return this.reconcile(factoryId, { force: waiting.force });
    });
    q.waiting = waiting;
    q.tail = waiting.promise.catch(() => undefined);
    return waiting.promise;
  }

  /**
   * Applies `revision`, a commit not (yet) on the production branch, and once it is live (applied or
   * unchanged) runs `publish`, which moves the branch to it: both in the factory's queue, so no poll
   * reconciles the branch in between. Never joined with other requests. A candidate whose apply fails,
   * or whose outcome is lost with the database, stays off the branch, and the next reconcile of the
   * branch head undoes it wherever it did reach the database.
   */
  applyCandidate(
    factoryId: string,
    revision: string,
    publish: () => Promise<void>,
  ): Promise<ReconcileOutcome> {
    const q = this.queues.get(factoryId) ?? { tail: Promise.resolve() };
    this.queues.set(factoryId, q);
    const done = q.tail.then(async () => {
      const outcome = await this.reconcile(factoryId, { force: true, revision });
      if (outcome.result === 'applied' || outcome.result === 'unchanged') await publish();
      return outcome;
    });
    q.tail = done.catch(() => undefined);
    return done;
  }

  /** What reconciling the head would change, without changing or recording anything. */
  plan(factoryId: string): Promise<ReconcileOutcome> {
    return this.reconcile(factoryId, { force: true, dryRun: true });
  }

  /**
   * One pass of the pipeline. `force` reconciles the head even when it was already attempted;
   * `revision` reconciles that commit instead of the head.
   */
  private async reconcile(
    factoryId: string,
    opts: { force: boolean; dryRun?: boolean; revision?: string },
  ): Promise<ReconcileOutcome> {
    const { force, dryRun = false } = opts;
    const startedAt = this.clock.now();
    const t0 = performance.now();
    let factory = await this.store.find(factoryId);
    if (!factory) throw new Error(`factory ${factoryId} does not exist`);

    // 1. Source: a repository the factory may read (checked on every pass: the row or a symlink on the
    // path may have changed since registration), the head of its production branch, then the files.
    let revision: string;
    let listed: ListedBlob[];
    let limitErrors: DefinitionError[];
    const cached = new Map<string, DefinitionFile>();
    let contents: Map<string, string>;
    // A head already attempted is a no-op, unless the status says the source failed since (fetch or
    // refusal): once it is readable again, the attempt is recorded, so the factory is ready again
    // without a new commit.
    const attempted = (f: FactoryRecord) =>
      !force &&
      revision === f.lastAttemptedRevision &&
      f.reason !== 'FetchFailed' &&
      f.reason !== 'SourceRefused';
    try {
      await this.policy.check(factory.repoUrl, factory);
      revision = opts.revision ?? (await this.source.head(factory));
      if (attempted(factory)) return { result: 'noop', revision, errors: [], factory };
      listed = await this.source.listTree(factory, revision, (p) => placementOf(p) !== undefined);
      limitErrors = checkTreeLimits(listed);
      const unread = new Set<string>();
      for (const blob of limitErrors.length ? [] : listed) {
        const file = this.parsed.get(`${blob.sha}:${blob.path}`);
        if (file) cached.set(blob.path, file);
        else if (!('misplaced' in placementOf(blob.path)!)) unread.add(blob.sha);
      }
      contents = await this.source.readBlobs(factory, [...unread]);
    } catch (err) {
      // A shutdown, or the database lost while the source was checked: not the repository's fault, so
      // nothing to record as FetchFailed; the caller answers 503 (a poll tries again).
      if (err instanceof GitStopped || isDatabaseUnreachable(err)) throw err;
      if (dryRun)
        return {
          result: 'failed',
          revision: null,
          errors: [{ path: '', line: 0, message: String(err) }],
          factory,
        };
      return this.recordSourceFailure(
        factory,
        err,
        err instanceof RepositoryRefused ? 'SourceRefused' : 'FetchFailed',
        force,
        startedAt,
        t0,
      );
    }

    try {
      // 2. Load: parse and schema-check each file not in the cache. A tree over the limits is not loaded.
      const { files, misplaced } = limitErrors.length
        ? { files: [], misplaced: [] }
        : parseTree(new Map(listed.map((b) => [b.path, b])), (kind, name, path, blob) => {
            let file = cached.get(path);
            if (!file) {
              file = parseDefinitionFile(kind, name, path, contents.get(blob.sha) ?? '', this.schemas);
              this.parsed.set(`${blob.sha}:${path}`, file);
            }
            return file;
          });

      // 3-5. Validate against the team's state, plan, apply and record: one transaction, one applier.
      return await this.store.db.transaction(async (tx) => {
        factory = await this.store.lock(tx, factoryId);
        if (attempted(factory)) return { result: 'noop', revision, errors: [], factory };
        const applied = await this.store.appliedState(tx, factoryId);
        const secrets = await this.secretsOf(tx, factory.teamId, files);
        const validation: ValidationResult = limitErrors.length
          ? { errors: limitErrors, skipped: [] }
          : validateDefinition(
              files,
              {
                knownWebhooks: applied.webhooks.map((w) => ({
                  uid: w.uid,
                  name: w.name,
                  path: w.path,
                  deleted: w.deleted,
                })),
                secrets: new Map([...secrets].map(([name, s]) => [name, { urlSafe: s.urlSafe }])),
                team: factory.teamName,
              },
              misplaced,
            );
        const errors = validation.errors;
        const done = (r: Omit<ApplyRecord, 'startedAt' | 'durationMs' | 'revision'>) => ({
          ...r,
          revision,
          startedAt,
          durationMs: Math.round(performance.now() - t0),
        });
        if (dryRun && (errors.length || !validation.definition))
          return { result: 'failed', revision, errors, factory };
        if (errors.length || !validation.definition) {
          const message = `${errors.length} error${errors.length === 1 ? '' : 's'} at ${revision.slice(0, 12)}; first: ${formatError(errors[0])}`;
          await this.store.record(
            tx,
            factoryId,
            done({ result: 'failed', reason: 'ValidationFailed', message, errors, plan: null }),
          );
          this.warnFailed(tx, factory, 'ValidationFailed', revision, message);
          return { result: 'failed', revision, errors, factory };
        }
        const versions = new Map([...secrets].map(([name, s]) => [name, s.versionId]));
        const plan = planChanges(
          validation.definition,
          applied,
          versions,
          revision !== factory.lastAppliedRevision,
        );
        if (dryRun) return { result: 'planned', revision, errors: [], factory, plan: summarize(plan) };
        const result = isEmpty(plan) ? 'unchanged' : 'applied';
        if (result === 'applied')
          await this.store.applyPlan(tx, factory, validation.definition, plan, startedAt);
        await this.store.record(
          tx,
          factoryId,
          done({
            result,
            reason: 'Applied',
            message: `revision ${revision} is live`,
            errors: [],
            plan: summarize(plan),
          }),
        );
        return { result, revision, errors: [], factory, plan: summarize(plan) };
      });
    } catch (err) {
      this.log.error({ err, factory: factory.name }, 'apply failed');
      const message = `apply of ${revision.slice(0, 12)} failed: ${err instanceof Error ? err.message : String(err)}`;
      const errors = [{ path: '', line: 0, message }];
      await this.store.db.transaction((tx) =>
        this.store.record(tx, factoryId, {
          revision,
          result: 'failed',
          reason: 'ApplyFailed',
          message,
          errors,
          plan: null,
          startedAt,
          durationMs: Math.round(performance.now() - t0),
        }),
      );
      return { result: 'failed', revision, errors, factory, cause: err };
    }
  }

  /** Current version (and URL-safety) of each team secret a webhook file names. */
  private async secretsOf(
    tx: Queryable,
    teamId: string,
    files: DefinitionFile[],
  ): Promise<Map<string, { versionId: string; urlSafe: boolean }>> {
    const names = new Set<string>();
    for (const f of files) {
      const name =
        f.kind === 'webhook'
          ? (f.source.data as { secretName?: unknown } | undefined)?.secretName
          : undefined;
      if (typeof name === 'string') names.add(name);
    }
    const out = new Map<string, { versionId: string; urlSafe: boolean }>();
    for (const name of names) {
      const current = await this.secrets.current(teamId, name, tx);
      if (current) out.set(name, { versionId: current.versionId, urlSafe: isUrlSafe(current.value) });
    }
    return out;
  }

  /** A source failure is recorded once per distinct message (polls would repeat it), or when forced. */
  private async recordSourceFailure(
    factory: FactoryRecord,
    err: unknown,
    reason: 'FetchFailed' | 'SourceRefused',
    force: boolean,
    startedAt: Date,
    t0: number,
  ): Promise<ReconcileOutcome> {
    const message = err instanceof Error ? err.message : String(err);
    const errors = [{ path: '', line: 0, message }];
    if (force || factory.reason !== reason || factory.message !== message) {
      await this.store.db.transaction(async (tx) => {
        this.warnFailed(tx, factory, reason, null, message);
        await this.store.record(tx, factory.id, {
          revision: null,
          result: 'failed',
          reason,
          message,
          errors,
          plan: null,
          startedAt,
          durationMs: Math.round(performance.now() - t0),
        });
      });
    }
    return { result: 'failed', revision: null, errors, factory };
  }

  /**
   * One warning line for each failure recorded (a revision once, a source failure once per message,
   * so polls repeat nothing): the status holds it, but an operator reads the log.
   */
  private warnFailed(
    tx: Queryable,
    factory: FactoryRecord,
    reason: string,
    revision: string | null,
    message: string,
  ): void {
    tx.afterCommit(() =>
      this.log.warn(
        { factory: factory.name, team: factory.teamName, reason, revision },
        `factory ${factory.name} (team ${factory.teamName}) failed to apply: ${reason}: ${message}`,
      ),
    );
  }
}
