import { Module } from '@nestjs/common';
import { AutomationsModule } from '../automations/automations.module.js';
import { ReconcilerModule } from '../reconciler/reconciler.module.js';
import { RunsModule } from '../runs/runs.module.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { FactorySchedules } from './factory-schedules.js';
import { ScheduleFiring } from './schedule-firing.js';
import { Scheduler } from './scheduler.js';
import { SchedulesController } from './schedules.controller.js';
import { SchedulesRepository } from './schedules.repository.js';
import { SchedulesService } from './schedules.service.js';

@Module({
  imports: [RunsModule, SecretsModule, AutomationsModule, ReconcilerModule],
  controllers: [SchedulesController],
  providers: [SchedulesRepository, SchedulesService, ScheduleFiring, FactorySchedules, Scheduler],
  exports: [ScheduleFiring, Scheduler],
})
export class SchedulesModule {}
