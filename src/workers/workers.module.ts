import {
  Inject,
  Injectable,
  Logger,
  Module,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { Metrics } from '../common/metrics.js';
import { CONFIG, type Config } from '../config/config.js';
import { Database } from '../database/database.js';
import { RunWakeups } from './queue/run-wakeups.js';
import {
  harnessCatalog,
  harnessSandbox,
  reportFailure,
  reportHarnessNetwork,
  serviceWorkspaceRoot,
  startHousekeeping,
  startServiceHostedPool,
  type Housekeeping,
} from './worker/service-workers.js';
import type { WorkerPool } from './worker/worker-pool.js';
import { WorkerRunsService } from './queue/worker-runs.service.js';
import { WorkersController } from './queue/workers.controller.js';
import { WorkerRunsModule } from './queue/worker-runs.module.js';

/** `factoryd serve`: the wake-ups, the reaper, and WORKER_CONCURRENCY service-hosted slots. */
@Injectable()
class ServiceWorkers implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('workers');
  private pool?: WorkerPool;
  private housekeeping?: Housekeeping;

  constructor(
    @Inject(Database) private readonly db: Database,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(WorkerRunsService) private readonly service: WorkerRunsService,
    @Inject(RunWakeups) private readonly wakeups: RunWakeups,
    @Inject(Metrics) private readonly metrics: Metrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const onError = (err: unknown) =>
      this.log.warn(`worker: ${err instanceof Error ? err.message : String(err)}`);
    this.wakeups.start();
    this.housekeeping = startHousekeeping(this.service, this.config, onError);
    if (this.config.workerConcurrency > 0) {
      const workspaces = serviceWorkspaceRoot(this.config);
      const sandbox = harnessSandbox(this.config, workspaces);
      this.log.log(`harness sandbox: ${sandbox.description}; workspaces under ${workspaces}`);
      const log = {
        info: (line: string) => this.log.log(line),
        warn: (line: string) => this.log.warn(line),
        error: (line: string) => this.log.error(line),
      };
      // Awaited: said before the "factoryd is up" banner, never in the middle of it (3 s at most).
      await reportHarnessNetwork(this.config, workspaces, log);
      const harnesses = await harnessCatalog(this.config);
      // The start banner says this (and `factoryd harnesses list`): here only for debugging.
      for (const line of harnesses.description.split('\n')) this.log.debug(line);
      this.pool = startServiceHostedPool(
        this.db,
        this.service,
        this.wakeups,
        this.config,
        harnesses,
        onError,
        log,
        this.config.workerConcurrency,
        (runId, report, err) => this.log.error(reportFailure(runId, report, err)),
        this.metrics.countHarnessStart,
      );
    }
  }

  /** Before HTTP closes: closing the wake-ups ends the self-hosted workers' long polls, which HTTP would wait for. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.pool?.stop();
    await this.housekeeping?.stop();
    await this.wakeups.close();
  }
}

@Module({
  imports: [WorkerRunsModule],
  controllers: [WorkersController],
  providers: [ServiceWorkers],
})
export class WorkersModule {}
