import { Global, Module } from '@nestjs/common';
import { Metrics } from '../common/metrics.js';
import { OpsController } from './ops.controller.js';
import { ReadinessRepository } from './readiness.repository.js';

@Global()
@Module({ controllers: [OpsController], providers: [Metrics, ReadinessRepository], exports: [Metrics] })
export class OpsModule {}
