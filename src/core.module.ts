import { type DynamicModule, Global, Module } from '@nestjs/common';
import { Clock } from './common/clock.js';
import { RequestValidator } from './common/request-validation.js';
import { SchemaRegistry } from './common/schema-validator.js';
import { CONFIG, type Config } from './config/config.js';
import { Database } from './database/database.js';
import { Notifications } from './database/notifications.js';

/** What every module may inject: configuration, the database and its notifications, the clock, the schemas. */
@Global()
@Module({})
export class CoreModule {
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
