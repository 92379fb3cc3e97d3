import { Module } from '@nestjs/common';
import { Clock } from '../../common/clock.js';
import { Metrics } from '../../common/metrics.js';
import { CONFIG, type Config } from '../../config/config.js';
import { HARNESS_DETECTION, type HarnessDetection } from '../../config/harness-detection.js';
import { Database } from '../../database/database.js';
import { Notifications } from '../../database/notifications.js';
import { EnvironmentResolver } from '../../environments/environment-resolver.js';
import { RunsModule } from '../../runs/runs.module.js';
import { RunsRepository } from '../../runs/runs.repository.js';
import { SecretsModule } from '../../secrets/secrets.module.js';
import { SecretsService } from '../../secrets/secrets.service.js';
import { RunWakeups } from './run-wakeups.js';
import { runPolicy, WorkerRunsService } from './worker-runs.service.js';

/** The run queue as workers see it: `serve`'s workers and the controller, and `factoryd worker`. */
@Module({
  imports: [RunsModule, SecretsModule],
  providers: [
    {
      provide: WorkerRunsService,
      // Metrics: `serve`'s (OpsModule); a `factoryd worker` counts nothing.
      inject: [Database, RunsRepository, CONFIG, Clock, SecretsService, { token: Metrics, optional: true }],
      useFactory: (
        db: Database,
        runs: RunsRepository,
        config: Config,
        clock: Clock,
        secrets: SecretsService,
        metrics: Metrics | undefined,
      ) =>
        new WorkerRunsService(
          db,
          runs,
          runPolicy(config),
          () => clock.now(),
          secrets,
          new EnvironmentResolver(db, secrets, config.docker.bridgeEnvironments),
          metrics,
        ),
    },
    {
      // GET /agent/models: which CLIs the workers that may run a team's runs have.
      provide: HARNESS_DETECTION,
      inject: [WorkerRunsService],
      useFactory: (service: WorkerRunsService): HarnessDetection => ({
        detected: (teamId) => service.detectedHarnesses(teamId),
      }),
    },
    {
      provide: RunWakeups,
      inject: [Notifications],
      useFactory: (notifications: Notifications) => new RunWakeups(notifications),
    },
  ],
  exports: [WorkerRunsService, RunWakeups, HARNESS_DETECTION],
})
export class WorkerRunsModule {}
