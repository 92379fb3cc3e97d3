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

/**
 * Statuses that refuse one message, not the receiver: its content (400 Bad Request, 409 Conflict,
 * 413 Content Too Large, 415 Unsupported Media Type, 422 Unprocessable Content). Any other failure —
 * no answer at all (refused, reset, timed out), a 5xx, 408, 429, a 401/403/404 that every message
 * would get — says the endpoint is not taking messages.
 */
const MESSAGE_REFUSALS = new Set([400, 409, 413, 415, 422]);

/**
 * Whether a failed attempt says the receiver as a whole is failing, so that its other messages wait
 * (docs/notifications.md, "A failing endpoint"), rather than that it refused this one message, which
 * then follows its own retries while the endpoint's other messages go on.
 */
export function receiverFailing(statusCode: number | null): boolean {
  return statusCode === null || !MESSAGE_REFUSALS.has(statusCode);
}
