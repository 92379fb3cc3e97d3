import { Module } from '@nestjs/common';
import { SecretsModule } from '../secrets/secrets.module.js';
import { DefinitionStore } from './definition-store.js';
import { GitRunner } from './git-runner.js';
import { ReconcileScheduler } from './reconcile-scheduler.js';
import { Reconciler } from './reconciler.js';

@Module({
  imports: [SecretsModule],
  providers: [DefinitionStore, GitRunner, Reconciler, ReconcileScheduler],
  exports: [DefinitionStore, GitRunner, Reconciler, ReconcileScheduler],
})
export class ReconcilerModule {}
