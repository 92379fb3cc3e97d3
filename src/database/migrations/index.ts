import { Foundation1763683200000 } from './1763683200000-foundation.js';
import { Definitions1763683300000 } from './1763683300000-definitions.js';
import { RunListIndexes1763683350000 } from './1763683350000-run-list-indexes.js';
import { Deliveries1763683500000 } from './1763683500000-deliveries.js';
import { Workers1763683600000 } from './1763683600000-workers.js';
import { SlidingRateLimits1763683700000 } from './1763683700000-sliding-rate-limits.js';
import { AwaitingWebhookSecrets1763684000000 } from './1763684000000-awaiting-webhook-secrets.js';
import { TeamHarness1763684100000 } from './1763684100000-team-harness.js';
import { RunSearchText1763684200000 } from './1763684200000-run-search-text.js';
import { WorkerKeys1763684300000 } from './1763684300000-worker-keys.js';
import { FairSlots1763684310000 } from './1763684310000-fair-slots.js';
import { SealMcpCredentials1763684400000 } from './1763684400000-seal-mcp-credentials.js';
import { Schedules1763685700000 } from './1763685700000-schedules.js';
import { OzAgentApi1763685800000 } from './1763685800000-oz-agent-api.js';
import { RunTransitions1763686100000 } from './1763686100000-run-transitions.js';
import { NotificationOutbox1763686200000 } from './1763686200000-notification-outbox.js';
import { DeliveryReplaySearch1763686300000 } from './1763686300000-delivery-replay-search.js';
import { SelfHostedQueue1763686400000 } from './1763686400000-self-hosted-queue.js';

import { RunTransitionsStarted1763686500000 } from './1763686500000-run-transitions-started.js';
import { NotificationEndpointPacing1763687000000 } from './1763687000000-notification-endpoint-pacing.js';
import { RunCreatedOutboxPerStatement1763688500000 } from './1763688500000-run-created-outbox-per-statement.js';
import { RunMetadataStatistics1763688600000 } from './1763688600000-run-metadata-statistics.js';
import { HarnessUsage1763688700000 } from './1763688700000-harness-usage.js';
import { HarnessTypes1763689000000 } from './1763689000000-harness-types.js';
import { RunOutputBounds1763689100000 } from './1763689100000-run-output-bounds.js';
import { Environments1763689200000 } from './1763689200000-environments.js';
import { RepositoryCredentials1763690320000 } from './1763690320000-repository-credentials.js';
import { RunItemFields1763690400000 } from './1763690400000-run-item-fields.js';
import { RunErrorCodes1763690410000 } from './1763690410000-run-error-codes.js';
import { NotificationClaimsPerEndpoint1763690420000 } from './1763690420000-notification-claims-per-endpoint.js';
import { NotificationRetention1763690440000 } from './1763690440000-notification-retention.js';
import { ArtifactsOneHome1763690450000 } from './1763690450000-artifacts-one-home.js';
import { RunItemCorrections1763690460000 } from './1763690460000-run-item-corrections.js';
import { NotificationEndpointClaim1763690470000 } from './1763690470000-notification-endpoint-claim.js';
import { TeamHarnessBaseUrls1763690530000 } from './1763690530000-team-harness-base-urls.js';
import { NotificationMessagesAtTheChange1763690540000 } from './1763690540000-notification-messages-at-the-change.js';
import { NotificationFunctionsPlannedOnce1763690550000 } from './1763690550000-notification-functions-planned-once.js';
import { NotificationQueueIndexes1763690560000 } from './1763690560000-notification-queue-indexes.js';
import { NotificationMessagesCheaperToStore1763690570000 } from './1763690570000-notification-messages-cheaper-to-store.js';
/** Every migration, oldest first. A schema change is a new file here, never an edit of an old one. */
export const MIGRATIONS = [
  Foundation1763683200000,
  Definitions1763683300000,
  RunListIndexes1763683350000,
  Deliveries1763683500000,
  Workers1763683600000,
  SlidingRateLimits1763683700000,
  AwaitingWebhookSecrets1763684000000,
  TeamHarness1763684100000,
  RunSearchText1763684200000,
  WorkerKeys1763684300000,
  FairSlots1763684310000,
  SealMcpCredentials1763684400000,
  Schedules1763685700000,
  OzAgentApi1763685800000,
  RunTransitions1763686100000,
  NotificationOutbox1763686200000,
  DeliveryReplaySearch1763686300000,
  SelfHostedQueue1763686400000,
  RunTransitionsStarted1763686500000,
  NotificationEndpointPacing1763687000000,
  RunCreatedOutboxPerStatement1763688500000,
  RunMetadataStatistics1763688600000,
  HarnessUsage1763688700000,
  HarnessTypes1763689000000,
  RunOutputBounds1763689100000,
  Environments1763689200000,
  RepositoryCredentials1763690320000,
  RunItemFields1763690400000,
  RunErrorCodes1763690410000,
  NotificationClaimsPerEndpoint1763690420000,
  NotificationRetention1763690440000,
  ArtifactsOneHome1763690450000,
  RunItemCorrections1763690460000,
  NotificationEndpointClaim1763690470000,
  TeamHarnessBaseUrls1763690530000,
  NotificationMessagesAtTheChange1763690540000,
  NotificationFunctionsPlannedOnce1763690550000,
  NotificationQueueIndexes1763690560000,
  NotificationMessagesCheaperToStore1763690570000,
];
