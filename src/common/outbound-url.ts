import { isIP } from 'node:net';

/** Where factoryd may POST notifications (docs/notifications.md, "Endpoint URLs"): pure, shared by the API and factory files. */

/** Why `url` cannot be an endpoint, or undefined. Private destinations are checked again at connect time. */
export function endpointUrlProblem(url: string, allowPrivate: boolean): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'url is not an absolute URL';
  }
  if (u.protocol !== 'https:' && !(allowPrivate && u.protocol === 'http:'))
    return allowPrivate
      ? 'url must be http:// or https://'
      : 'url must be https:// (http:// needs NOTIFICATIONS_ALLOW_PRIVATE_URLS=true)';
  if (u.username || u.password)
    return 'url must not carry credentials (the signature authenticates factoryd)';
  if (url.length > 2048) return 'url is longer than 2048 characters';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (
    !allowPrivate &&
    (host === 'localhost' || host.endsWith('.localhost') || (isIP(host) && isPrivateAddress(host)))
  )
    return `url points at a private or loopback address (${host}); allowed only with NOTIFICATIONS_ALLOW_PRIVATE_URLS=true`;
  return undefined;
}

/**
 * Loopback, private, link-local (cloud metadata), unspecified, CGNAT, multicast and reserved ranges,
 * IPv4-mapped IPv6 included: where a notification must not reach unless private URLs are allowed (SSRF).
 */
export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return isPrivateAddress(mapped[1]!);
  // The same, as URL parsing writes it (::ffff:c0a8:1).
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex) {
    const [hi, lo] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
    return isPrivateAddress(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`);
  }
  if (isIP(address) === 4) {
    const [a, b] = address.split('.').map(Number) as [number, number];
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b <= 127) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) ||
      (a === 198 && (b === 18 || b === 19)) ||
      a >= 224
    );
  }
  const v6 = address.toLowerCase();
  return (
    v6 === '::' ||
    v6 === '::1' ||
    /^f[cd]/.test(v6) ||
    /^fe[89ab]/.test(v6) ||
    /^ff/.test(v6) ||
    v6.startsWith('64:ff9b:')
  );
}
