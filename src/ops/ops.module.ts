import { Global, Module } from '@nestjs/common';
import { Metrics } from './metrics.js';
import { OpsController } from './ops.controller.js';

@Global()
@Module({ controllers: [OpsController], providers: [Metrics], exports: [Metrics] })
export class OpsModule {}
