import { Module } from '@nestjs/common';
import { MetricsModule } from '../common/metrics.js';
import { OpsController } from './ops.controller.js';
import { ReadinessRepository } from './readiness.repository.js';

@Module({ imports: [MetricsModule], controllers: [OpsController], providers: [ReadinessRepository] })
export class OpsModule {}
