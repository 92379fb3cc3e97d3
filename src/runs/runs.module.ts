import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { RunListRepository } from './run-list.js';
import { RunsController } from './runs.controller.js';
import { RunsRepository } from './runs.repository.js';
import { RunsService } from './runs.service.js';
import { RunsSignal } from './runs-signal.js';
import { NamedAgents } from './named-agents.js';
import { RunArtifacts } from './run-artifacts.repository.js';
import { TeamQueueCap } from './team-queue-cap.js';

@Module({
  imports: [AuthModule, SecretsModule],
  controllers: [RunsController],
  providers: [
    RunsRepository,
    RunListRepository,
    RunsService,
    RunsSignal,
    NamedAgents,
    RunArtifacts,
    TeamQueueCap,
  ],
  exports: [RunsRepository, RunsService, RunsSignal, NamedAgents, RunArtifacts, TeamQueueCap],
})
export class RunsModule {}
