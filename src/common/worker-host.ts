/** `worker_host` of the service-hosted workers (a run without one runs there). */
export const SERVICE_WORKER_HOST = 'warp';

/** Why `host` cannot be a self-hosted worker's id (undefined: it can). */
export function selfHostedHostProblem(host: unknown, name = 'worker_host'): string | undefined {
  if (typeof host !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(host))
    return `${name} must be 1-64 characters of [A-Za-z0-9._-]`;
  if (host === SERVICE_WORKER_HOST)
    return `worker_host "${SERVICE_WORKER_HOST}" is reserved for the service-hosted workers`;
  return undefined;
}
