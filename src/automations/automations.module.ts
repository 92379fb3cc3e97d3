import { Module } from '@nestjs/common';
import { AutomationsRepository } from './automations.repository.js';
import { DefinitionsListener } from './definitions-listener.js';
import { TriggerIndex } from './trigger-index.js';

@Module({
  providers: [TriggerIndex, DefinitionsListener, AutomationsRepository],
  exports: [TriggerIndex, DefinitionsListener],
})
export class AutomationsModule {}
