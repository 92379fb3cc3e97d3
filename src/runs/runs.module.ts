import { Module } from '@nestjs/common';
import { SecretsModule } from '../secrets/secrets.module.js';
import { RunListRepository } from './run-list.js';
import { RunsController } from './runs.controller.js';
import { RunsRepository } from './runs.repository.js';
import { RunsService } from './runs.service.js';
import { RunsSignal } from './runs-signal.js';
import { NamedAgents } from './named-agents.js';
import { RunArtifacts } from './run-artifacts.repository.js';

@Module({
  imports: [SecretsModule],
  controllers: [RunsController],
  providers: [RunsRepository, RunListRepository, RunsService, RunsSignal, NamedAgents, RunArtifacts],
  exports: [RunsRepository, RunsService, RunsSignal, NamedAgents, RunArtifacts],
})
export class RunsModule {}
