/**
 * The one way a test waits: it re-checks a condition until it holds, or fails with what it waited
 * for and the last thing it saw. Tests wait on events this way, never on a fixed sleep.
 *
 * `check` returns a value: a truthy one ends the wait and is returned; a falsy one or a throw means
 * "not yet" (the throw's message is reported if the wait runs out).
 */
export async function eventually<T>(
  check: () => T | Promise<T>,
  what: string,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<NonNullable<T>> {
  const { timeoutMs = 20_000, intervalMs = 25 } = opts;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last seen: ${seen})`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
