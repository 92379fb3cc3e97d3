import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { headerNames } from '../automations/header-filter.js';
import { isCredentialHeader } from '../definitions/credential-headers.js';
import { UUID_PATTERN } from '../common/ids.js';
import { invalidParam, NotFound, RequestInvalid } from '../common/problem.js';
import { checkFilterLimits } from '../definitions/filter-limits.js';
import { DeliveryLog, type DeliveryEntry } from '../webhooks/delivery-log.js';
import { ManagementRepository } from './management.repository.js';
import { testFilter, type FilterTestResult, type GivenFilter } from './test-filter.js';
import { WebhookManagement } from './webhook-management.service.js';

export interface TestFilterRequest {
  delivery?: string;
  automation?: string;
  /** The filter, or its text as an automation file writes it (YAML). */
  filter?: GivenFilter | string;
}

export type TestFilterResponse = FilterTestResult & {
  delivery: { id: string; delivery_id: string | null; received_at: string };
  automation?: string;
};

/** Test filter: an automation's trigger, or a filter from the request, against a stored Accepted delivery. */
@Injectable()
export class FilterTests {
  constructor(
    @Inject(WebhookManagement) private readonly webhooks: WebhookManagement,
    @Inject(ManagementRepository) private readonly repo: ManagementRepository,
    @Inject(DeliveryLog) private readonly log: DeliveryLog,
  ) {}

  async run(
    auth: AuthContext,
    uid: string,
    req: TestFilterRequest & { filter?: GivenFilter },
  ): Promise<TestFilterResponse> {
    if ((req.automation === undefined) === (req.filter === undefined))
      throw new RequestInvalid([
        {
          path: '',
          message: 'give exactly one of automation (an automation name) or filter (a trigger filter)',
        },
      ]);
    if (req.filter?.payload) {
      const problems = checkFilterLimits(req.filter.payload);
      if (problems.length)
        throw new RequestInvalid(problems.map((message) => ({ path: 'filter.payload', message })));
    }
    const credentials = headerNames(req.filter?.headers).filter(isCredentialHeader);
    if (credentials.length)
      throw new RequestInvalid(
        credentials.map((name) => ({
          path: `filter.headers.${name}`,
          message: `${name} may carry a credential, and credentials are never matchable (nor stored)`,
        })),
      );
    const webhook = await this.webhooks.get(auth, uid);
    let target: Parameters<typeof testFilter>[2];
    if (req.automation !== undefined) {
      const automations = await this.repo.automations(webhook.factory_id);
      const automation = automations.find((a) => a.name === req.automation);
      if (!automation)
        throw invalidParam(
          'automation',
          `the factory of webhook ${webhook.name} has no automation ${req.automation}; its automations: ${automations.map((a) => a.name).join(', ') || 'none'}`,
        );
      target = { automation };
    } else target = { filter: req.filter! };
    const delivery = await this.delivery(webhook.id, uid, req.delivery);
    return {
      ...testFilter(webhook, { payload: delivery.payload, headers: delivery.headers }, target),
      delivery: {
        id: delivery.id,
        delivery_id: delivery.identity,
        received_at: delivery.receivedAt.toISOString(),
      },
      ...(req.automation !== undefined ? { automation: req.automation } : {}),
    };
  }

  /** The named log entry, or the newest Accepted one; only Accepted entries keep a payload. */
  private async delivery(webhookId: string, uid: string, id: string | undefined): Promise<DeliveryEntry> {
    if (id === undefined) {
      const [newest] = (await this.log.list(webhookId, { status: 'accepted', limit: 1 })).entries;
      if (!newest)
        throw new NotFound(
          `webhook ${uid} has no Accepted delivery to test against yet: send one, or name a delivery log entry with "delivery"`,
        );
      id = newest.id;
    }
    const entry = UUID_PATTERN.test(id) ? await this.log.get(webhookId, id) : undefined;
    if (!entry) throw new NotFound(`webhook ${uid} has no delivery log entry ${id}`);
    if (entry.status !== 'accepted')
      throw invalidParam(
        'delivery',
        `delivery log entry ${id} is ${entry.status}, and only Accepted deliveries keep their payload: pick one from GET /api/v1/webhooks/${uid}/deliveries?status=accepted`,
      );
    return entry;
  }
}
