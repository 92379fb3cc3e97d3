import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ApiEdge } from './api-edge.js';
import { ApiKeyGuard } from './auth.guard.js';
import { AuthRepository } from './auth.repository.js';
import { AuthService } from './auth.service.js';

@Module({
  providers: [AuthRepository, AuthService, ApiEdge, { provide: APP_GUARD, useClass: ApiKeyGuard }],
  exports: [AuthService, AuthRepository],
})
export class AuthModule {}
