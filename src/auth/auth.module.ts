import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiEdge } from './api-edge.js';
import { ApiKeyGuard } from './auth.guard.js';
import { AuthRepository } from './auth.repository.js';
import { AuthService } from './auth.service.js';

/** Teams, principals and API keys: what the API's guard and the CLI's commands both use. */
@Module({
  providers: [AuthRepository, AuthService],
  exports: [AuthService, AuthRepository],
})
export class AuthModule {}

/** The API's edge: Fastify's hooks before a body is read, and the key check on every route (serve only). */
@Module({
  imports: [AuthModule],
  providers: [ApiEdge, { provide: APP_GUARD, useClass: ApiKeyGuard }],
})
export class ApiEdgeModule {}
