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

/** Git to tables on request: what `serve` and the CLI's `plan`, `apply` and `factories add` share. */
@Module({
  imports: [SecretsModule],
  providers: [DefinitionStore, GitRunner, gitSource, Reconciler],
  exports: [DefinitionStore, GitRunner, Reconciler],
})
export class ReconcilerModule {}

/** The reconciler's triggers (the poll, the watches on local repositories): serve only. */
@Module({
  imports: [ReconcilerModule],
  providers: [ReconcileScheduler],
  exports: [ReconcileScheduler],
})
export class ReconcileSchedulerModule {}
