import { Module } from '@nestjs/common';
import { RunsController } from './runs.controller.js';
import { RunsRepository } from './runs.repository.js';
import { RunsService } from './runs.service.js';
import { RunsSignal } from './runs-signal.js';

@Module({
  controllers: [RunsController],
  providers: [RunsRepository, RunsService, RunsSignal],
  exports: [RunsRepository, RunsService, RunsSignal],
})
export class RunsModule {}
