import { Module } from '@nestjs/common';
import { AutomationsModule } from '../automations/automations.module.js';
import { RunsModule } from '../runs/runs.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { DeliveriesController } from './deliveries.controller.js';
import { DeliveriesService } from './deliveries.service.js';
import { DeliveryCommits } from './delivery-commits.js';
import { DeliveryLog } from './delivery-log.js';
import { DeliveryRetention } from './delivery-retention.js';
import { IngressLimits } from './ingress-limits.js';
import { IngressRoutes } from './ingress.routes.js';
import { IngressService } from './ingress.service.js';
import { WebhookDirectory } from './webhook-directory.js';

@Module({
  imports: [AutomationsModule, RunsModule, SecretsModule],
  controllers: [DeliveriesController],
  providers: [
    WebhookDirectory,
    IngressLimits,
    DeliveryLog,
    DeliveryCommits,
    IngressService,
    IngressRoutes,
    DeliveriesService,
    DeliveryRetention,
  ],
  exports: [DeliveryLog, WebhookDirectory],
})
export class WebhooksModule {}
