import { Module } from '@nestjs/common';
import { DefinitionsListener } from './definitions-listener.js';
import { TriggerIndex } from './trigger-index.js';

@Module({
  providers: [TriggerIndex, DefinitionsListener],
  exports: [TriggerIndex, DefinitionsListener],
})
export class AutomationsModule {}
