import { Module } from '@nestjs/common';
import { SecretsModule } from '../secrets/secrets.module.js';
import { RunsController } from './runs.controller.js';
import { RunsRepository } from './runs.repository.js';
import { RunsService } from './runs.service.js';
import { RunsSignal } from './runs-signal.js';
import { NamedAgents } from './named-agents.js';

@Module({
  imports: [SecretsModule],
  controllers: [RunsController],
  providers: [RunsRepository, RunsService, RunsSignal, NamedAgents],
  exports: [RunsRepository, RunsService, RunsSignal, NamedAgents],
})
export class RunsModule {}
