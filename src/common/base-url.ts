import type { FastifyRequest } from 'fastify';

/** PUBLIC_BASE_URL when configured; else what the caller used to reach us. */
export function publicBaseUrl(req: FastifyRequest, configured: string | undefined): string {
  if (configured) return configured;
  return `${req.protocol}://${req.headers.host ?? 'localhost'}`;
}

/** Base of webhook ingress URLs: WEBHOOK_BASE_URL, else PUBLIC_BASE_URL, else the request's host. */
export function webhookBaseUrl(
  req: FastifyRequest,
  config: { webhookBaseUrl?: string; publicBaseUrl?: string },
): string {
  return config.webhookBaseUrl ?? publicBaseUrl(req, config.publicBaseUrl);
}
