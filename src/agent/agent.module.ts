import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { EnvironmentsModule } from '../environments/environments.module.js';
import { RunsModule } from '../runs/runs.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { AgentCatalogRepository } from './agent-catalog.repository.js';
import { AgentCatalogService } from './agent-catalog.service.js';
import { AgentController } from './agent.controller.js';
import { AgentIdentitiesRepository } from './agent-identities.repository.js';
import { AgentIdentitiesService } from './agent-identities.service.js';
import { ArtifactsService } from './artifacts.service.js';
import { IdentitiesController } from './identities.controller.js';
import { RedirectsService } from './redirects.service.js';

/**
 * The Oz clients' agent surface beyond runs (layer 4, beside factories/ and workers/): named agents
 * (a factory's agents among them), skills, environments, artifacts, handoff files and redirects.
 */
@Module({
  imports: [AuthModule, RunsModule, SecretsModule, EnvironmentsModule],
  controllers: [IdentitiesController, AgentController],
  providers: [
    AgentIdentitiesRepository,
    AgentIdentitiesService,
    AgentCatalogRepository,
    AgentCatalogService,
    ArtifactsService,
    RedirectsService,
  ],
})
export class AgentModule {}
