import { type DynamicModule, Global, Module } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ApiEdgeModule, AuthModule } from './auth/auth.module.js';
import { AutomationsModule } from './automations/automations.module.js';
import { Clock } from './common/clock.js';
import { ProblemFilter } from './common/problem.filter.js';
import { RequestValidator } from './common/request-validation.js';
import { SchemaRegistry } from './common/schema-validator.js';
import { CONFIG, type Config } from './config/config.js';
import { Database } from './database/database.js';
import { Notifications } from './database/notifications.js';
import { FactoriesModule } from './factories/factories.module.js';
import { ManagementModule } from './management/management.module.js';
import { NotificationsModule } from './notifications/notifications.module.js';
import { OpsModule } from './ops/ops.module.js';
import { ReconcilerModule, ReconcileSchedulerModule } from './reconciler/reconciler.module.js';
import { RunsModule } from './runs/runs.module.js';
import { SchedulesModule } from './schedules/schedules.module.js';
import { RunStreamsModule } from './notifications/run-streams.module.js';
import { SecretsModule } from './secrets/secrets.module.js';
import { WebhooksModule } from './webhooks/webhooks.module.js';
import { ConversationsModule } from './conversations/conversations.module.js';
import { DashboardModule } from './dashboard/dashboard.module.js';
import { WorkerRunsModule, WorkersModule } from './workers/workers.module.js';
import { FactoryRegistrationsModule } from './management/factory-registrations.js';
import { AgentModule } from './agent/agent.module.js';

/** What every module may inject: configuration, the database and its notifications, the clock, the schemas. */
@Global()
@Module({})
class CoreModule {
  static forRoot(config: Config, db: Database, schemas: SchemaRegistry): DynamicModule {
    const providers = [
      { provide: CONFIG, useValue: config },
      { provide: Database, useValue: db },
      Notifications,
      { provide: SchemaRegistry, useValue: schemas },
      Clock,
      RequestValidator,
    ];
    return { module: CoreModule, providers, exports: providers.map((p) => ('provide' in p ? p.provide : p)) };
  }
}

@Module({})
export class AppModule {
  static forRoot(config: Config, db: Database, schemas = new SchemaRegistry()): DynamicModule {
    return {
      module: AppModule,
      imports: [
        CoreModule.forRoot(config, db, schemas),
        OpsModule,
        AuthModule,
        ApiEdgeModule,
        SecretsModule,
        RunsModule,
        ReconcilerModule,
        ReconcileSchedulerModule,
        FactoriesModule,
        AutomationsModule,
        WebhooksModule,
        ConversationsModule,
        WorkersModule,
        ManagementModule,
        SchedulesModule,
        AgentModule,
        DashboardModule,
        NotificationsModule,
        RunStreamsModule,
      ],
      providers: [{ provide: APP_FILTER, useClass: ProblemFilter }],
    };
  }
}

/**
 * What the CLI's database commands run on: the services `serve` composes, from the same modules, less
 * everything that serves or runs on its own (the HTTP edge, the reconciler's poll, the schedules, the
 * notification dispatchers, the live streams, the service-hosted workers). `factoryd worker` starts
 * its own pool on the services here.
 */
@Module({})
export class CommandsModule {
  static forRoot(config: Config, db: Database, schemas = new SchemaRegistry()): DynamicModule {
    return {
      module: CommandsModule,
      imports: [
        CoreModule.forRoot(config, db, schemas),
        AuthModule,
        SecretsModule,
        ReconcilerModule,
        FactoryRegistrationsModule,
        ConversationsModule,
        WorkerRunsModule,
      ],
    };
  }
}
