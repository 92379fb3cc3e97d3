/**
 * How a failing message is retried (docs/notifications.md). Pure: no clock, no I/O. The schedule (the
 * pause before each attempt, the first counted from the event, the others from the failure before) is
 * configuration: NOTIFICATIONS_RETRY_SCHEDULE_MS, default Svix's — immediately, 5 s, 5 min, 30 min,
 * 2 h, 5 h, 10 h, 10 h: eight attempts over about 27.6 h.
 */

/** How much of an endpoint's answer the attempt log keeps. */
export const RESPONSE_EXCERPT_BYTES = 1024;

/** When the attempt after `attempts` failed ones is due, or undefined when the schedule is spent. */
export function nextAttemptDelay(schedule: readonly number[], attempts: number): number | undefined {
  return attempts < schedule.length ? schedule[attempts] : undefined;
}
