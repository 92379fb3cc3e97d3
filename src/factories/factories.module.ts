import { Module } from '@nestjs/common';
import { ReconcilerModule } from '../reconciler/reconciler.module.js';
import { RunsModule } from '../runs/runs.module.js';
import { FactoriesController } from './factories.controller.js';
import { FactoriesRepository } from './factories.repository.js';
import { FactoriesService } from './factories.service.js';

@Module({
  imports: [ReconcilerModule, RunsModule],
  controllers: [FactoriesController],
  providers: [FactoriesRepository, FactoriesService],
  exports: [FactoriesService],
})
export class FactoriesModule {}
