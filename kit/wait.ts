/**
 * Polls `fn` every `intervalMs` until it returns a truthy value, and returns it.
 * @throws Error naming `what` (with the last value seen) after `timeoutMs`.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T> | T,
  timeoutMs = 20_000,
  intervalMs = 50,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last as NonNullable<T>;
    } catch (e) {
      lastErr = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}; last value ${JSON.stringify(last)}${lastErr ? `, last error ${(lastErr as Error).message}` : ''}`,
  );
}
