import { Module } from '@nestjs/common';
import { RunActivityRepository } from './run-activity.repository.js';
import { RunFeed } from './run-feed.js';
import { RunStreamsController } from './run-streams.controller.js';
import { RunStreamsService } from './run-streams.service.js';

/** The run timeline and the live streams of runs (SSE). */
@Module({
  controllers: [RunStreamsController],
  providers: [RunActivityRepository, RunFeed, RunStreamsService],
})
export class RunStreamsModule {}
