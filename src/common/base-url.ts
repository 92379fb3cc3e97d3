import type { FastifyRequest } from 'fastify';

/**
 * PUBLIC_BASE_URL when configured; else the address the request's connection reached (the service's
 * own listening address). Never the `Host` header: any caller sets it, and a link built from it (an
 * artifact's download URL, a webhook's ingress URL shown to a team) would point wherever the caller
 * chose — through a cache or a proxy, to someone else. Behind a proxy, set PUBLIC_BASE_URL.
 */
export function publicBaseUrl(req: FastifyRequest, configured: string | undefined): string {
  if (configured) return configured;
  const socket = req.raw.socket;
  // A dual-stack socket reports an IPv4 peer's address as ::ffff:a.b.c.d.
  const address = (socket.localAddress ?? '127.0.0.1').replace(/^::ffff:(?=\d+\.)/, '');
  return `${req.protocol}://${address.includes(':') ? `[${address}]` : address}:${socket.localPort}`;
}

/** Base of webhook ingress URLs: WEBHOOK_BASE_URL, else PUBLIC_BASE_URL, else the listening address. */
export function webhookBaseUrl(
  req: FastifyRequest,
  config: { webhookBaseUrl?: string; publicBaseUrl?: string },
): string {
  return config.webhookBaseUrl ?? publicBaseUrl(req, config.publicBaseUrl);
}
