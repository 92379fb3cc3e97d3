import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ApiKeyController } from './api-key.controller.js';
import { DashboardPages } from './dashboard-pages.js';

/** The web dashboard (docs/dashboard.md): its static pages, and the one route it adds to the API. */
@Module({
  imports: [AuthModule],
  controllers: [ApiKeyController],
  providers: [DashboardPages],
})
export class DashboardModule {}
