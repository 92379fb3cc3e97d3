import { Module } from '@nestjs/common';
import { Database } from '../database/database.js';
import { EnvironmentsRepository } from './environments.repository.js';

/** The reads of teams' environments, for the API (the reconciler writes them, the workers resolve them). */
@Module({
  providers: [
    {
      provide: EnvironmentsRepository,
      inject: [Database],
      useFactory: (db: Database) => new EnvironmentsRepository(db),
    },
  ],
  exports: [EnvironmentsRepository],
})
export class EnvironmentsModule {}
