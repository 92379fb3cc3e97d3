import { Module } from '@nestjs/common';
import { EnvironmentsModule } from '../environments/environments.module.js';
import { FactoriesModule } from '../factories/factories.module.js';
import { ReconcilerModule } from '../reconciler/reconciler.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { WebhooksModule } from '../webhooks/webhooks.module.js';
import { FactoryRegistrationsModule } from './factory-registrations.js';
import { EnvironmentManagement } from './environment-management.service.js';
import { EnvironmentsController } from './environments.controller.js';
import { ManagementController } from './management.controller.js';
import { ManagementRepository } from './management.repository.js';
import { FilterTests } from './test-filter.service.js';
import { WebhookManagement } from './webhook-management.service.js';

/** Layer 5: the dashboard's operations, on every lower layer; definition writes go through the reconciler. */
@Module({
  imports: [
    ReconcilerModule,
    SecretsModule,
    FactoryRegistrationsModule,
    FactoriesModule,
    WebhooksModule,
    EnvironmentsModule,
  ],
  controllers: [ManagementController, EnvironmentsController],
  providers: [ManagementRepository, WebhookManagement, EnvironmentManagement, FilterTests],
})
export class ManagementModule {}
