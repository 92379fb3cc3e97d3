import { join } from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { watch, type FSWatcher } from 'chokidar';
import { CONFIG, type Config } from '../config/config.js';
import { DefinitionStore, type FactoryRecord } from './definition-store.js';
import { GitSource } from './git-source.js';
import { Reconciler } from './reconciler.js';
import { RepositoryPolicy } from './repository-policy.js';

/** How long a burst of ref changes (a commit writes several files) is gathered into one reconcile. */
const WATCH_DEBOUNCE_MS = 50;

/**
 * The reconciler's triggers: a poll of every factory each FACTORY_POLL_SECONDS (which also picks up
 * factories registered since), and a watch on each local repository's refs so a commit applies
 * within a second or two. Both feed Reconciler.request.
 */
@Injectable()
export class ReconcileScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly log = new Logger('ReconcileScheduler');
  private timer?: NodeJS.Timeout;
  private readonly watchers = new Map<string, FSWatcher>();
  private stopped = false;
  private readonly policy: RepositoryPolicy;
  private firstPollDone!: () => void;
  /** Settles when the first poll after start has finished. */
  readonly firstPoll = new Promise<void>((resolve) => (this.firstPollDone = resolve));

  constructor(
    @Inject(Reconciler) private readonly reconciler: Reconciler,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.policy = new RepositoryPolicy(config, store);
  }

  onApplicationBootstrap(): void {
    const tick = () => {
      this.pollAll()
        .catch((err: unknown) => this.log.warn({ err }, 'poll failed'))
        .finally(() => {
          this.firstPollDone();
          if (!this.stopped) this.timer = setTimeout(tick, this.config.factoryPollSeconds * 1000);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all([...this.watchers.values()].map((w) => w.close()));
    this.watchers.clear();
  }

  /** Reconciles every factory whose head moved; starts watching new local repositories (ready when this resolves). */
  async pollAll(): Promise<void> {
    const factories = await this.store.listAll();
    await Promise.all(
      factories.map(async (f) => {
        if (!f.managed && GitSource.isLocal(f.repoUrl) && !this.watchers.has(f.id) && (await this.mayRead(f)))
          await this.watchRefs(f.id, f.repoUrl);
        await this.reconciler
          .request(f.id)
          .catch((err: unknown) => this.log.warn({ err, factory: f.name }, 'reconcile failed'));
      }),
    );
  }

  /** A repository the factory may not read is not watched either (its reconcile records why). */
  private mayRead(f: FactoryRecord): Promise<boolean> {
    return this.policy.check(f.repoUrl, f).then(
      () => true,
      () => false,
    );
  }

  private async watchRefs(factoryId: string, repo: string): Promise<void> {
    if (this.stopped) return;
    const gitDir = await GitSource.gitDir(repo);
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
        this.reconciler
          .request(factoryId)
          .catch((err: unknown) => this.log.warn({ err }, 'reconcile failed'));
      }, WATCH_DEBOUNCE_MS);
    });
    watcher.on('error', (err: unknown) => this.log.warn({ err, repo }, 'watch failed'));
    this.watchers.set(factoryId, watcher);
    await new Promise<void>((resolve) => watcher.once('ready', () => resolve()));
  }
}
