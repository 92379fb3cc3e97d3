import { describe, expect, it } from 'vitest';
import { metricsAddress } from './metrics-listener.js';

describe('--metrics [host:]port', () => {
  it.each([
    ['9464', { host: '127.0.0.1', port: 9464 }],
    ['0.0.0.0:9464', { host: '0.0.0.0', port: 9464 }],
    ['localhost:0', { host: 'localhost', port: 0 }],
    ['[::1]:9464', { host: '::1', port: 9464 }],
  ])('reads %s', (text, address) => {
    expect(metricsAddress(text)).toEqual(address);
  });

  it.each([':9464', '70000', 'localhost:', 'a:b:9464', '::1:9464', 'localhost:http', ''])(
    'refuses "%s", saying what it takes',
    (text) => {
      expect(() => metricsAddress(text)).toThrow(
        `--metrics takes [host:]port (say 9464, or 0.0.0.0:9464 for every interface), got "${text}"`,
      );
    },
  );
});
