import { type DynamicModule, Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ConversationsModule } from '../conversations/conversations.module.js';
import { RunUsageRepository } from '../runs/run-usage.repository.js';
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
import { ModelsService } from './models.service.js';
import { RedirectsService } from './redirects.service.js';
import { RunHarnessController } from './run-harness.controller.js';
import { RunHarnessService } from './run-harness.service.js';

/**
 * The Oz clients' agent surface beyond runs (layer 4, beside factories/ and workers/): named agents
 * (a factory's agents among them), skills, environments, artifacts, handoff files, redirects, models,
 * and a run's transcript and harness usage. Composed with withDetection.
 */
@Module({
  imports: [AuthModule, RunsModule, SecretsModule, ConversationsModule, EnvironmentsModule],
  controllers: [IdentitiesController, AgentController, RunHarnessController],
  providers: [
    AgentIdentitiesRepository,
    AgentIdentitiesService,
    AgentCatalogRepository,
    AgentCatalogService,
    ArtifactsService,
    RedirectsService,
    ModelsService,
    RunHarnessService,
    RunUsageRepository,
  ],
})
export class AgentModule {
  /**
   * With the module that provides HARNESS_DETECTION (which CLIs the team's workers have: the run
   * queue's, a module beside this one, so the composition hands it in).
   */
  static withDetection(detection: DynamicModule['module']): DynamicModule {
    return { module: AgentModule, imports: [detection] };
  }
}
