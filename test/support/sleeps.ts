import { randomInt } from 'node:crypto';

/**
 * A `/wait` duration for the example harness that no other process on the machine shares: tests find
 * the harness's `sleep` child in the process table by its command line, and a plain `sleep 200` could
 * be anyone's (another test run, a shell waiting for it) — which once made a cancel test report a
 * leftover harness that was not one.
 */
export function uniqueSleep(seconds: number): { wait: string; processArgs: string } {
  // Four decimals, the last not 0: the harness passes on String(Number(value)), which drops trailing zeros.
  const value = `${seconds}.${randomInt(100, 1000)}${randomInt(1, 10)}`;
  return { wait: `/wait ${value}`, processArgs: `sleep ${value}` };
}
