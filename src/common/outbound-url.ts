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
  if (!allowPrivate && isInternalHost(host))
    return `url points at a private, loopback or reserved address (${host}); allowed only with NOTIFICATIONS_ALLOW_PRIVATE_URLS=true`;
  return undefined;
}

/**
 * Whether a URL's host (without brackets) names this machine or a private network by itself: `localhost`
 * (and its subdomains) or an address literal isPrivateAddress refuses. A name that resolves to such an
 * address is caught where it is connected to.
 */
export function isInternalHost(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost') || (isIP(host) !== 0 && isPrivateAddress(host));
}

/**
 * Loopback, private, link-local (cloud metadata), unspecified, CGNAT, benchmarking, documentation,
 * multicast and reserved ranges;
 * for IPv6 also every form that carries an IPv4 address (mapped `::ffff:a.b.c.d`, compatible
 * `::a.b.c.d` — `[::7f00:1]` is 127.0.0.1 —, translated `::ffff:0:a.b.c.d`, 6to4 `2002:…`) judged
 * by that address, and NAT64 and Teredo as a whole (a gateway turns them into any IPv4 address):
 * where a notification must not reach unless private URLs are allowed (SSRF).
 */
export function isPrivateAddress(address: string): boolean {
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
      reservedIpv4(address) ||
      a >= 224
    );
  }
  const g = ipv6Groups(address);
  if (!g) return true; // not an address this check understands: not a safe one
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && (g[5] === 0 || g[5] === 0xffff)) {
    if (g[5] === 0 && g[6] === 0 && g[7] <= 1) return true; // :: and ::1
    return isPrivateAddress(v4(g[6]!, g[7]!)); // compatible ::a.b.c.d and mapped ::ffff:a.b.c.d
  }
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return isPrivateAddress(v4(g[6]!, g[7]!));
  if (g[0] === 0x2002) return isPrivateAddress(v4(g[1]!, g[2]!)); // 6to4
  return (
    (g[0] === 0x64 && g[1] === 0xff9b) || // NAT64, well-known and local-use prefixes
    (g[0] === 0x2001 && g[1] === 0) || // Teredo
    (g[0] === 0x2001 && g[1] === 0xdb8) || // documentation
    (g[0] === 0x100 && zeros(1, 4)) || // discard-only
    (g[0]! & 0xfe00) === 0xfc00 || // unique local
    (g[0]! & 0xffc0) === 0xfe80 || // link-local
    (g[0]! & 0xffc0) === 0xfec0 || // site-local (deprecated)
    (g[0]! & 0xff00) === 0xff00 // multicast
  );
}

/**
 * The /24s set apart for protocol use and documentation (192.0.0/24, TEST-NET-1/2/3) and the 6to4
 * relay anycast (192.88.99/24): never a public receiver, and networks that borrow them internally are
 * private ones. IPv6's documentation prefix is refused too.
 */
function reservedIpv4(address: string): boolean {
  const prefix = address.slice(0, address.lastIndexOf('.'));
  return ['192.0.0', '192.0.2', '192.88.99', '198.51.100', '203.0.113'].includes(prefix);
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted quad read), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const part = (p: string | undefined) => (p ? p.split(':').map((x) => parseInt(x, 16)) : []);
  const [h, t] = [part(head), part(tail)];
  const groups = tail === undefined ? h : [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
  return groups.length === 8 ? groups : undefined;
}
