import { join } from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { watch, type FSWatcher } from 'chokidar';
import { Periodic } from '../common/periodic.js';
import { CONFIG, type Config } from '../config/config.js';
import { DefinitionStore, type FactoryRecord } from './definition-store.js';
import { GitStopped } from '../git/git-runner.js';
import { GitSource } from './git-source.js';
import { Reconciler } from './reconciler.js';
import { RepositoryPolicy } from './repository-policy.js';

/** How long a burst of ref changes (a commit writes several files) is gathered into one reconcile. */
const WATCH_DEBOUNCE_MS = 50;

/**
 * The reconciler's triggers: a poll of every factory each FACTORY_POLL_SECONDS (which also picks up
 * factories registered since), and a watch on each local repository's refs so a commit applies
 * within a second or two. Both feed Reconciler.request.
 *
 * Factories are polled independently: a tick starts a poll of each factory that has none in flight
 * and does not wait for them, so a slow or hanging remote (bounded by GIT_TIMEOUT_SECONDS) delays
 * only its own factory, and is not fetched again until its poll has ended.
 */
@Injectable()
export class ReconcileScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('ReconcileScheduler');
  private readonly polling: Periodic;
  private firstTick = true;
  private readonly watchers = new Map<string, FSWatcher>();
  /** Each factory's poll in flight, by factory id. */
  private readonly polls = new Map<string, Promise<void>>();
  private stopped = false;
  private readonly policy: RepositoryPolicy;
  private firstPollDone!: () => void;
  /** Settles when the polls of the first tick after start have ended. */
  readonly firstPoll = new Promise<void>((resolve) => (this.firstPollDone = resolve));

  constructor(
    @Inject(Reconciler) private readonly reconciler: Reconciler,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.policy = new RepositoryPolicy(config, store);
    this.polling = new Periodic({
      everyMs: config.factoryPollSeconds * 1000,
      firstAfterMs: 0,
      run: () => this.tick(),
      onError: (err) => this.log.warn({ err }, 'poll failed'),
    });
  }

  onApplicationBootstrap(): void {
    this.polling.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    await this.polling.stop();
    await Promise.all([...this.watchers.values()].map((w) => w.close()));
    this.watchers.clear();
  }

  /** Starts the polls (without waiting for them: the next tick skips factories still polling). */
  private async tick(): Promise<void> {
    const started = this.startPolls();
    if (this.firstTick) {
      this.firstTick = false;
      void started
        .then(
          (polls) => Promise.all(polls),
          () => undefined,
        )
        .then(this.firstPollDone);
    }
    await started;
  }

  /**
   * Polls every factory (joining a poll already in flight) and resolves when those polls have ended;
   * new local repositories are being watched by then.
   */
  async pollAll(): Promise<void> {
    await Promise.all(await this.startPolls());
  }

  /** A poll of each factory without one in flight; returns every factory's poll. */
  private async startPolls(): Promise<Array<Promise<void>>> {
    if (this.stopped) return [];
    const factories = await this.store.listAll();
    if (this.stopped) return [];
    // A removed factory's repository is no longer watched (`factoryd factories remove`).
    const listed = new Set(factories.map((f) => f.id));
    for (const [id, watcher] of this.watchers)
      if (!listed.has(id)) {
        this.watchers.delete(id);
        void watcher.close();
      }
    return factories.map((f) => {
      let poll = this.polls.get(f.id);
      if (!poll) {
        poll = this.poll(f).finally(() => this.polls.delete(f.id));
        this.polls.set(f.id, poll);
      }
      return poll;
    });
  }

  private async poll(f: FactoryRecord): Promise<void> {
    try {
      if (!f.managed && GitSource.isLocal(f.repoUrl) && !this.watchers.has(f.id)) {
        const gitDir = await this.mayRead(f);
        if (gitDir) await this.watchRefs(f.id, gitDir);
      }
      await this.reconciler.request(f.id);
    } catch (err) {
      this.failed(err, f.id);
    }
  }

  /** A reconcile's failure is logged, except the end of a git call by the shutdown. */
  private failed(err: unknown, factoryId: string): void {
    if (!(err instanceof GitStopped)) this.log.warn({ err, factoryId }, 'reconcile failed');
  }

  /**
   * The git directory of a local repository the factory may read; one it may not read is not watched
   * either (its reconcile records why).
   */
  private mayRead(f: FactoryRecord): Promise<string | undefined> {
    return this.policy.check(f.repoUrl, f).catch(() => undefined);
  }

  private async watchRefs(factoryId: string, gitDir: string): Promise<void> {
    if (this.stopped) return;
    let debounce: NodeJS.Timeout | undefined;
    const heads = join(gitDir, 'refs', 'heads');
    const packed = join(gitDir, 'packed-refs');
    // Only the branch refs matter; objects/, logs/ and the index are never walked.
    const relevant = (p: string) =>
      p === gitDir ||
      p === packed ||
      p === heads ||
      p.startsWith(`${heads}/`) ||
      `${heads}/`.startsWith(`${p}/`);
    const watcher = watch(gitDir, { ignoreInitial: true, ignored: (p: string) => !relevant(p) });
    watcher.on('all', () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => {
        this.reconciler.request(factoryId).catch((err: unknown) => this.failed(err, factoryId));
      }, WATCH_DEBOUNCE_MS);
    });
    watcher.on('error', (err: unknown) => this.log.warn({ err, gitDir }, 'watch failed'));
    this.watchers.set(factoryId, watcher);
    await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  }
}
