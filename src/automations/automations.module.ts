import { Module } from '@nestjs/common';
import { AutomationsRepository } from './automations.repository.js';
import { TriggerIndex } from './trigger-index.js';

@Module({
  providers: [TriggerIndex, AutomationsRepository],
  exports: [TriggerIndex],
})
export class AutomationsModule {}
