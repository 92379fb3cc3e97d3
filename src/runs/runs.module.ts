import { Module } from '@nestjs/common';
import { SecretsModule } from '../secrets/secrets.module.js';
import { RunListRepository } from './run-list.js';
import { RunsController } from './runs.controller.js';
import { RunsRepository } from './runs.repository.js';
import { RunsService } from './runs.service.js';
import { RunsSignal } from './runs-signal.js';

@Module({
  imports: [SecretsModule],
  controllers: [RunsController],
  providers: [RunsRepository, RunListRepository, RunsService, RunsSignal],
  exports: [RunsRepository, RunsService, RunsSignal],
})
export class RunsModule {}
