import { Module } from '@nestjs/common';
import { TriggerIndex } from './trigger-index.js';

@Module({
  providers: [TriggerIndex],
  exports: [TriggerIndex],
})
export class AutomationsModule {}
