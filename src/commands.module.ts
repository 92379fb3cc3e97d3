import { type DynamicModule, Module } from '@nestjs/common';
import { AuthModule } from './auth/auth.module.js';
import { SchemaRegistry } from './common/schema-validator.js';
import type { Config } from './config/config.js';
import type { Database } from './database/database.js';
import { CoreModule } from './core.module.js';
import { FactoryRegistrationsModule } from './management/factory-registrations.js';
import { ReconcilerModule } from './reconciler/reconciler.module.js';
import { SecretsModule } from './secrets/secrets.module.js';
import type { Type } from '@nestjs/common';

/**
 * What the CLI's database commands run on: the services `serve` composes, from the same modules, less
 * everything that serves or runs on its own (the HTTP edge, the reconciler's poll, the schedules, the
 * notification dispatchers, the live streams, the service-hosted workers). A command that needs more adds
 * its module (`factoryd worker` the run queue's, on which it starts its own pool). A file apart from AppModule's: a command loads only these modules.
 */
@Module({})
export class CommandsModule {
  /** `more`: modules a command needs beyond these, loaded by that command only (a CLI starts in less). */
  static forRoot(
    config: Config,
    db: Database,
    more: Type[] = [],
    schemas = new SchemaRegistry(),
  ): DynamicModule {
    return {
      module: CommandsModule,
      imports: [
        CoreModule.forRoot(config, db, schemas),
        AuthModule,
        SecretsModule,
        ReconcilerModule,
        FactoryRegistrationsModule,
        ...more,
      ],
    };
  }
}
