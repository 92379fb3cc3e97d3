import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { Metrics } from '../common/metrics.js';
import { isDatabaseUnreachable } from '../common/problem.js';
import { SchemaRegistry } from '../common/schema-validator.js';
import { CONFIG, type Config } from '../config/config.js';
import type { Queryable } from '../database/database.js';
import { formatError, type DefinitionError, type FactoryDefinition } from '../definitions/definition.js';
import { parseDefinitionFile, placementOf, type DefinitionFile } from '../definitions/definition-file.js';
import { checkTreeLimits } from '../definitions/definition-limits.js';
import { ParsedFileCache } from '../definitions/parsed-file-cache.js';
import { isUrlSafe, parseTree, validateDefinition } from '../definitions/validate-definition.js';
import { SecretsService } from '../secrets/secrets.service.js';
import {
  DefinitionStore,
  type ApplyRecord,
  type FactoryRecord,
  isSourceFailure,
} from './definition-store.js';
import { GitStopped, type GitCredentials } from '../git/git-runner.js';
import { GitSource, type ListedBlob } from './git-source.js';
import { isEmpty, planChanges, summarize, type AppliedState, type Plan, type PlanSummary } from './plan.js';
import { credentialsOf, keepCredentials, splitCredentials } from './repository-credentials.js';
import { RepositoryPolicy, RepositoryRefused } from './repository-policy.js';
import { setSecretCommand } from '../secrets/secret-commands.js';

/** The repository may not be read (RepositoryPolicy): nothing was fetched. */
export interface SourceRefused {
  reason: 'SourceRefused';
  message: string;
}

/** The head or the files of the revision could not be read. */
export interface FetchFailed {
  reason: 'FetchFailed';
  message: string;
}

/** The revision is not a valid definition: every error, by file and line. */
export interface ValidationFailed {
  reason: 'ValidationFailed';
  revision: string;
  errors: DefinitionError[];
}

/** The database refused the apply of a valid revision: rolled back, the previous revision stays live. */
export interface ApplyFailed {
  reason: 'ApplyFailed';
  revision: string;
  message: string;
  cause: unknown;
}

/** Why a reconcile did not make its revision live; `reason` is what the status and the history show. */
export type ReconcileFailure = SourceRefused | FetchFailed | ValidationFailed | ApplyFailed;

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
  /** The step that failed, when `result` is `failed`. */
  failure?: ReconcileFailure;
  /** Why a `failed` apply failed when the service failed (not the definition): the error itself. */
  cause?: unknown;
}

/** One pass: what was asked, and when it started (for the record's duration). */
interface Attempt {
  factoryId: string;
  force: boolean;
  dryRun: boolean;
  startedAt: Date;
  t0: number;
}

/** A step's result: its value, or the failure that ends the pass. */
type Step<T, F extends ReconcileFailure> = { ok: true; value: T } | { ok: false; failure: F };

/** The files of a revision as read from git: parsed ones from the cache, the rest as contents. */
interface Fetched {
  revision: string;
  listed: ListedBlob[];
  limitErrors: DefinitionError[];
  cached: Map<string, DefinitionFile>;
  contents: Map<string, string>;
}

/** The revision's files parsed and schema-checked (none when the tree is over the limits). */
interface Loaded {
  revision: string;
  files: DefinitionFile[];
  misplaced: DefinitionError[];
  limitErrors: DefinitionError[];
}

/** The team secrets an environment file names (its repositories' credentials, its secret variables). */
function environmentSecretNames(data: unknown): string[] {
  const d = (data ?? {}) as { repositories?: unknown; secrets?: unknown };
  const repositories = Array.isArray(d.repositories)
    ? (d.repositories as Array<{ credentialSecret?: unknown }>)
    : [];
  const variables = d.secrets && typeof d.secrets === 'object' ? Object.values(d.secrets) : [];
  return [...repositories.map((r) => r?.credentialSecret), ...variables].filter(
    (n): n is string => typeof n === 'string',
  );
}

/** The team's secrets a revision's webhooks name: current version and whether it may be a url_token. */
type CurrentSecrets = Map<string, { versionId: string; urlSafe: boolean; whsec: boolean }>;

/** How a pass ends: a live revision (applied or already equal), or a failure. */
type Verdict =
  | { ok: true; revision: string; result: 'applied' | 'unchanged'; plan: PlanSummary }
  | { ok: false; failure: ReconcileFailure };

const ok = <T>(value: T) => ({ ok: true as const, value });
const failed = <F extends ReconcileFailure>(failure: F) => ({ ok: false as const, failure });
const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * Keeps PostgreSQL equal to the head of each factory's production branch, one whole commit at a time,
 * in a straight line: fetch → load → lock → validate → plan → apply → record. Each step returns its
 * value or a typed failure; `conclude` alone records the attempt. A bad commit leaves the last good
 * revision live and is recorded as failed with every error. Polls, the ref watch and "refresh now"
 * all go through `request`; they, a candidate's apply and a plan take turns in one queue per factory.
 */
@Injectable()
export class Reconciler {
  private readonly log = new Logger('Reconciler');
  private readonly policy: RepositoryPolicy;
  private readonly allowPrivateUrls: boolean;
  private readonly bridgeEnvironments: Config['docker']['bridgeEnvironments'];
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
    @Inject(GitSource) private readonly source: GitSource,
    /** The service's metrics (reconcile results); absent in the CLI's own reconciles. */
    @Optional() @Inject(Metrics) private readonly metrics?: Metrics,
  ) {
    this.policy = new RepositoryPolicy(config, store);
    this.allowPrivateUrls = config.notificationsAllowPrivateUrls;
    this.bridgeEnvironments = config.docker.bridgeEnvironments;
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
    return this.enqueue(factoryId, async () => {
      const outcome = await this.reconcile(factoryId, { force: true, revision });
      if (outcome.result === 'applied' || outcome.result === 'unchanged') await publish();
      return outcome;
    });
  }

  /**
   * What reconciling the head would change: the same steps, stopping before apply; records nothing.
   * In the factory's queue like a reconcile, so its fetch never overlaps one into the same mirror.
   */
  plan(factoryId: string): Promise<ReconcileOutcome> {
    return this.enqueue(factoryId, () => this.reconcile(factoryId, { force: true, dryRun: true }));
  }

  /** Runs `pass` after everything already in the factory's queue; never joined with other requests. */
  private enqueue(factoryId: string, pass: () => Promise<ReconcileOutcome>): Promise<ReconcileOutcome> {
    const q = this.queues.get(factoryId) ?? { tail: Promise.resolve() };
    this.queues.set(factoryId, q);
    const done = q.tail.then(pass);
    q.tail = done.catch(() => undefined);
    return done;
  }

  /**
   * One pass of the pipeline, counted by its result and reason (`error`: it threw, the database
   * gone for one). `force` reconciles the head even when it was already attempted; `revision`
   * reconciles that commit instead of the head.
   */
  private async reconcile(
    factoryId: string,
    opts: { force: boolean; dryRun?: boolean; revision?: string },
  ): Promise<ReconcileOutcome> {
    try {
      const outcome = await this.pass(factoryId, opts);
      const reason = outcome.failure?.reason;
      this.metrics?.reconciles.inc({ result: outcome.result, ...(reason && { reason }) });
      return outcome;
    } catch (err) {
      this.metrics?.reconciles.inc({ result: 'error' });
      throw err;
    }
  }

  private async pass(
    factoryId: string,
    opts: { force: boolean; dryRun?: boolean; revision?: string },
  ): Promise<ReconcileOutcome> {
    const attempt: Attempt = {
      factoryId,
      force: opts.force,
      dryRun: opts.dryRun ?? false,
      startedAt: this.clock.now(),
      t0: performance.now(),
    };
    const found = await this.store.find(factoryId);
    if (!found) throw new Error(`factory ${factoryId} does not exist`);
    const factory = await this.credentialsOutOfUrl(found);

    const head = await this.head(factory, opts.revision);
    if (!head.ok) return this.conclude(attempt, factory, head);
    const { revision, from } = head.value;
    if (this.attempted(attempt, factory, revision)) return { result: 'noop', revision, errors: [], factory };
    const fetched = await this.fetch(from, revision);
    if (!fetched.ok) return this.conclude(attempt, factory, fetched);

    let locked = factory;
    try {
      const loaded = this.load(fetched.value);
      return await this.store.transaction(async (tx) => {
        locked = await this.store.lock(tx, factoryId);
        if (this.attempted(attempt, locked, revision))
          return { result: 'noop', revision, errors: [], factory: locked };
        const applied = await this.store.appliedState(tx, factoryId);
        const secrets = await this.currentSecrets(tx, locked.teamId, loaded.files);
        const valid = this.validate(locked, loaded, applied, secrets);
        if (!valid.ok) return this.conclude(attempt, locked, valid, tx);
        const plan = this.planOf(locked, valid.value, revision, applied, secrets);
        if (attempt.dryRun)
          return { result: 'planned', revision, errors: [], factory: locked, plan: summarize(plan) };
        const result = isEmpty(plan) ? 'unchanged' : 'applied';
        if (result === 'applied')
          await this.store.applyPlan(tx, locked, valid.value, plan, attempt.startedAt);
        return this.conclude(attempt, locked, { ok: true, revision, result, plan: summarize(plan) }, tx);
      });
    } catch (err) {
      const message = `apply of ${revision.slice(0, 12)} failed: ${messageOf(err)}`;
      return this.conclude(attempt, locked, failed({ reason: 'ApplyFailed', revision, message, cause: err }));
    }
  }

  /**
   * A row written before credentials were kept as a team secret (or by hand) with them in its URL:
   * moved into the secret before anything is fetched, so git never sees them on its command line.
   */
  private async credentialsOutOfUrl(factory: FactoryRecord): Promise<FactoryRecord> {
    let split: ReturnType<typeof splitCredentials>;
    try {
      split = splitCredentials(factory.repoUrl);
    } catch {
      return factory; // an ssh:// password: the policy refuses the source, and says why
    }
    if (!split) return factory;
    const secret = await keepCredentials({ store: this.store, secrets: this.secrets }, factory, split);
    this.log.warn(
      { factory: factory.name, team: factory.teamName, secret },
      `moved the credentials in the repository URL of factory ${factory.name} into the team secret ${secret}`,
    );
    return { ...factory, repoUrl: split.url, repoCredentialsSecret: secret };
  }

  /**
   * Source, first half: a repository the factory may read (checked on every pass: the row or a symlink
   * on the path may have changed since registration), and the revision to reconcile. `from` is where
   * the pass reads: a local repository at the real git directory the policy checked.
   */
  private async head(
    factory: FactoryRecord,
    revision: string | undefined,
  ): Promise<Step<{ revision: string; from: FactoryRecord }, SourceRefused | FetchFailed>> {
    return this.fromSource(async () => {
      const checked = await this.policy.check(factory.repoUrl, factory);
      const from = checked
        ? { ...factory, repoUrl: checked }
        : { ...factory, credentials: await this.credentials(factory) };
      return { revision: revision ?? (await this.source.head(from)), from };
    });
  }

  /** The credentials of a remote repository, from the team secret its factory names. */
  private async credentials(factory: FactoryRecord): Promise<GitCredentials | undefined> {
    const name = factory.repoCredentialsSecret;
    if (!name) return undefined;
    const secret = await this.secrets.current(factory.teamId, name);
    if (!secret)
      throw new Error(
        `the team secret ${name}, which holds the credentials of the repository, does not exist: set it to USERNAME:PASSWORD (or a token alone) with ${setSecretCommand(name, { team: factory.teamName })}`,
      );
    return credentialsOf(secret.value);
  }

  /** Source, second half: the revision's definition files; the parsed ones come from the cache. */
  private async fetch(
    factory: FactoryRecord,
    revision: string,
  ): Promise<Step<Fetched, SourceRefused | FetchFailed>> {
    return this.fromSource(async () => {
      const listed = await this.source.listTree(factory, revision, (p) => placementOf(p) !== undefined);
      const limitErrors = checkTreeLimits(listed);
      const cached = new Map<string, DefinitionFile>();
      const unread = new Set<string>();
      for (const blob of limitErrors.length ? [] : listed) {
        const file = this.parsed.get(`${blob.sha}:${blob.path}`);
        if (file) cached.set(blob.path, file);
        else if (!('misplaced' in placementOf(blob.path)!)) unread.add(blob.sha);
      }
      const contents = await this.source.readBlobs(factory, [...unread]);
      return { revision, listed, limitErrors, cached, contents };
    });
  }

  /** A source step: what git or the policy refuses is its failure; a shutdown or a lost database is thrown. */
  private async fromSource<T>(read: () => Promise<T>): Promise<Step<T, SourceRefused | FetchFailed>> {
    try {
      return ok(await read());
    } catch (err) {
      // Not the repository's fault, so nothing to record as FetchFailed: the caller answers 503 (a poll
      // tries again).
      if (err instanceof GitStopped || isDatabaseUnreachable(err)) throw err;
      const message = messageOf(err);
      return failed(
        err instanceof RepositoryRefused
          ? { reason: 'SourceRefused' as const, message }
          : { reason: 'FetchFailed' as const, message },
      );
    }
  }

  /** Load: parse and schema-check each file not in the cache. A tree over the limits is not loaded. */
  private load({ revision, listed, limitErrors, cached, contents }: Fetched): Loaded {
    if (limitErrors.length) return { revision, files: [], misplaced: [], limitErrors };
    const { files, misplaced } = parseTree(
      new Map(listed.map((b) => [b.path, b])),
      (kind, name, path, blob) => {
        let file = cached.get(path);
        if (!file) {
          file = parseDefinitionFile(kind, name, path, contents.get(blob.sha) ?? '', this.schemas);
          this.parsed.set(`${blob.sha}:${path}`, file);
        }
        return file;
      },
    );
    return { revision, files, misplaced, limitErrors };
  }

  /** Validate against what only the service knows: the factory's webhook UIDs and the team's secrets. */
  private validate(
    factory: FactoryRecord,
    { revision, files, misplaced, limitErrors }: Loaded,
    applied: AppliedState,
    secrets: CurrentSecrets,
  ): Step<FactoryDefinition, ValidationFailed> {
    if (limitErrors.length) return failed({ reason: 'ValidationFailed', revision, errors: limitErrors });
    const { definition, errors } = validateDefinition(
      files,
      {
        knownWebhooks: applied.webhooks.map(({ uid, name, path, deleted }) => ({ uid, name, path, deleted })),
        secrets: new Map([...secrets].map(([name, s]) => [name, { urlSafe: s.urlSafe, whsec: s.whsec }])),
        team: factory.teamName,
        allowPrivateUrls: this.allowPrivateUrls,
        bridgeEnvironments: this.bridgeEnvironments
          .filter((b) => b.team === factory.teamName)
          .map((b) => b.environment),
      },
      misplaced,
    );
    if (errors.length || !definition) return failed({ reason: 'ValidationFailed', revision, errors });
    return ok(definition);
  }

  /** Plan: what applying the definition changes in the applied state. */
  private planOf(
    factory: FactoryRecord,
    definition: FactoryDefinition,
    revision: string,
    applied: AppliedState,
    secrets: CurrentSecrets,
  ): Plan {
    const versions = new Map([...secrets].map(([name, s]) => [name, s.versionId]));
    return planChanges(definition, applied, versions, revision !== factory.lastAppliedRevision);
  }

  /**
   * A head already attempted is a no-op, unless the status says the source failed since (fetch or
   * refusal): once it is readable again, the attempt is recorded, so the factory is ready again
   * without a new commit.
   */
  private attempted(attempt: Attempt, factory: FactoryRecord, revision: string): boolean {
    return !attempt.force && revision === factory.lastAttemptedRevision && !isSourceFailure(factory.reason);
  }

  /** Current version (and URL-safety) of each team secret a webhook file names. */
  private async currentSecrets(
    tx: Queryable,
    teamId: string,
    files: DefinitionFile[],
  ): Promise<CurrentSecrets> {
    const names = new Set<string>();
    for (const f of files) {
      const name =
        f.kind === 'webhook' || f.kind === 'notification'
          ? (f.source.data as { secretName?: unknown } | undefined)?.secretName
          : undefined;
      if (typeof name === 'string') names.add(name);
      if (f.kind === 'environment')
        for (const secret of environmentSecretNames(f.source.data)) names.add(secret);
    }
    const out: CurrentSecrets = new Map();
    for (const name of names) {
      const current = await this.secrets.current(teamId, name, tx);
      if (current)
        out.set(name, {
          versionId: current.versionId,
          urlSafe: isUrlSafe(current.value),
          whsec: current.value.startsWith('whsec_'),
        });
    }
    return out;
  }

  /**
   * Record: the one place an attempt is written to the history (factory_applies) and the status, in
   * `tx` (the apply's own, so a live revision and its record commit together) or in a transaction of
   * its own (a source failure, or an apply rolled back). A dry run records nothing. A source failure
   * is recorded once per distinct message (polls would repeat it), or when forced.
   */
  private async conclude(
    attempt: Attempt,
    factory: FactoryRecord,
    verdict: Verdict,
    tx?: Queryable,
  ): Promise<ReconcileOutcome> {
    const record = this.recordOf(attempt, verdict);
    const outcome: ReconcileOutcome = verdict.ok
      ? { result: verdict.result, revision: verdict.revision, errors: [], factory, plan: verdict.plan }
      : {
          result: 'failed',
          revision: record.revision,
          errors: record.errors,
          factory,
          failure: verdict.failure,
          ...(verdict.failure.reason === 'ApplyFailed' && { cause: verdict.failure.cause }),
        };
    if (attempt.dryRun) return outcome;
    if (!verdict.ok && isSourceFailure(verdict.failure.reason)) {
      const repeated = factory.reason === record.reason && factory.message === record.message;
      if (repeated && !attempt.force) return outcome;
    }
    if (!verdict.ok && verdict.failure.reason === 'ApplyFailed')
      this.log.error({ err: verdict.failure.cause, factory: factory.name }, 'apply failed');
    const write = async (q: Queryable) => {
      if (!verdict.ok && verdict.failure.reason !== 'ApplyFailed') this.warnFailed(q, factory, record);
      await this.store.record(q, attempt.factoryId, record);
    };
    if (tx) await write(tx);
    else await this.store.transaction(write);
    return outcome;
  }

  /** The history row and status of an attempt. */
  private recordOf(attempt: Attempt, verdict: Verdict): ApplyRecord {
    const timing = {
      startedAt: attempt.startedAt,
      durationMs: Math.round(performance.now() - attempt.t0),
    };
    if (verdict.ok) {
      const { revision, result, plan } = verdict;
      return {
        revision,
        result,
        reason: 'Applied',
        message: `revision ${revision} is live`,
        errors: [],
        plan,
        ...timing,
      };
    }
    const f = verdict.failure;
    const common = { result: 'failed' as const, reason: f.reason, plan: null, ...timing };
    switch (f.reason) {
      case 'SourceRefused':
      case 'FetchFailed':
        return {
          ...common,
          revision: null,
          message: f.message,
          errors: [{ path: '', line: 0, message: f.message }],
        };
      case 'ValidationFailed': {
        const n = f.errors.length;
        const message = `${n} error${n === 1 ? '' : 's'} at ${f.revision.slice(0, 12)}; first: ${formatError(f.errors[0])}`;
        return { ...common, revision: f.revision, message, errors: f.errors };
      }
      case 'ApplyFailed':
        return {
          ...common,
          revision: f.revision,
          message: f.message,
          errors: [{ path: '', line: 0, message: f.message }],
        };
    }
  }

  /**
   * One warning line for each failure recorded (a revision once, a source failure once per message,
   * so polls repeat nothing): the status holds it, but an operator reads the log.
   */
  private warnFailed(tx: Queryable, factory: FactoryRecord, r: ApplyRecord): void {
    tx.afterCommit(() =>
      this.log.warn(
        { factory: factory.name, team: factory.teamName, reason: r.reason, revision: r.revision },
        `factory ${factory.name} (team ${factory.teamName}) failed to apply: ${r.reason}: ${r.message}`,
      ),
    );
  }
}
