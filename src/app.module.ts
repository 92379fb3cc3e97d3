import { type DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ApiEdgeModule } from './auth/api-edge.module.js';
import { AutomationsModule } from './automations/automations.module.js';
import { ProblemFilter } from './common/problem.filter.js';
import { SchemaRegistry } from './common/schema-validator.js';
import type { Config } from './config/config.js';
import type { Database } from './database/database.js';
import { CommandsModule } from './commands.module.js';
import { FactoriesModule } from './factories/factories.module.js';
import { ManagementModule } from './management/management.module.js';
import { NotificationsModule } from './notifications/notifications.module.js';
import { OpsModule } from './ops/ops.module.js';
import { ReconcileSchedulerModule } from './reconciler/reconciler.module.js';
import { RunsModule } from './runs/runs.module.js';
import { SchedulesModule } from './schedules/schedules.module.js';
import { RunStreamsModule } from './notifications/run-streams.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';
import { ConversationsModule } from './conversations/conversations.module.js';
import { DashboardModule } from './dashboard/dashboard.module.js';
import { WorkersModule } from './workers/workers.module.js';
import { AgentModule } from './agent/agent.module.js';
import { WorkerRunsModule } from './workers/queue/worker-runs.module.js';

@Module({})
export class AppModule {
  static forRoot(config: Config, db: Database, schemas = new SchemaRegistry()): DynamicModule {
    return {
      module: AppModule,
      imports: [
        // What the CLI's commands run on, then what serves: the API, the ingress, the triggers, the workers.
        CommandsModule.forRoot(config, db, [], schemas),
        OpsModule,
        ApiEdgeModule,
        RunsModule,
        ReconcileSchedulerModule,
        FactoriesModule,
        AutomationsModule,
        WebhooksModule,
        ConversationsModule,
        WorkersModule,
        ManagementModule,
        SchedulesModule,
        AgentModule.withDetection(WorkerRunsModule),
        DashboardModule,
        NotificationsModule,
        RunStreamsModule,
      ],
      providers: [{ provide: APP_FILTER, useClass: ProblemFilter }],
    };
  }
}
