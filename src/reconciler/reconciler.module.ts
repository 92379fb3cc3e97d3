import { Module } from '@nestjs/common';
import { CONFIG, type Config } from '../config/config.js';
import { SecretsModule } from '../secrets/secrets.module.js';
import { DefinitionStore } from './definition-store.js';
import { GitRunner } from '../git/git-runner.js';
import { GitSource } from './git-source.js';
import { ReconcileScheduler } from './reconcile-scheduler.js';
import { Reconciler } from './reconciler.js';

/** Factories' repositories (mirrors of remote ones under DATA_DIR), read through git. */
const gitSource = {
  provide: GitSource,
  useFactory: (config: Config, git: GitRunner) => new GitSource(config.dataDir, git),
  inject: [CONFIG, GitRunner],
};

@Module({
  imports: [SecretsModule],
  providers: [DefinitionStore, GitRunner, gitSource, Reconciler, ReconcileScheduler],
  exports: [DefinitionStore, GitRunner, Reconciler, ReconcileScheduler],
})
export class ReconcilerModule {}
