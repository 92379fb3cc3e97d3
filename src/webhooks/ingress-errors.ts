import { ApiError } from '../common/problem.js';

export class MethodNotAllowed extends ApiError {
  constructor() {
    super(405, 'method_not_allowed', 'Method not allowed', 'Webhook deliveries are POST requests.', {
      headers: { Allow: 'POST' },
    });
  }
}

export class PayloadTooLarge extends ApiError {
  constructor(limit: number) {
    super(413, 'payload_too_large', 'Payload too large', `A webhook body may be at most ${limit} bytes.`);
  }
}

export class WebhookAuthFailed extends ApiError {
  constructor(detail: string) {
    super(401, 'authentication_required', 'Authentication required', detail);
  }
}
