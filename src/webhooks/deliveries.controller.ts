import { Controller, Get, Inject, Param, Query } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Auth, RequireScope } from '../auth/auth.guard.js';
import { DeliveriesService } from './deliveries.service.js';

/** The delivery log, read side: GET /api/v1/webhooks/{uid}/deliveries[/{id}]. */
@Controller('api/v1/webhooks/:uid/deliveries')
export class DeliveriesController {
  constructor(@Inject(DeliveriesService) private readonly deliveries: DeliveriesService) {}

  @Get()
  @RequireScope('runs:read')
  list(@Auth() auth: AuthContext, @Param('uid') uid: string, @Query() query: Record<string, unknown>) {
    return this.deliveries.list(auth, uid, query);
  }

  @Get(':id')
  @RequireScope('runs:read')
  get(@Auth() auth: AuthContext, @Param('uid') uid: string, @Param('id') id: string) {
    return this.deliveries.get(auth, uid, id);
  }
}
