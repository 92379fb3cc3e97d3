import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiEdge } from './api-edge.js';
import { AuthModule } from './auth.module.js';
import { ApiKeyGuard } from './auth.guard.js';

/** The API's edge: Fastify's hooks before a body is read, and the key check on every route (serve only). */
@Module({
  imports: [AuthModule],
  providers: [ApiEdge, { provide: APP_GUARD, useClass: ApiKeyGuard }],
})
export class ApiEdgeModule {}
