import { Module } from '@nestjs/common';
import { AuthRepository } from './auth.repository.js';
import { AuthService } from './auth.service.js';

/** Teams, principals and API keys: what the API's guard and the CLI's commands both use. */
@Module({
  providers: [AuthRepository, AuthService],
  exports: [AuthService, AuthRepository],
})
export class AuthModule {}
