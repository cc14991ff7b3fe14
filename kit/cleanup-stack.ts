/**
 * A stack of cleanups for a test node: `push` as each part starts, `close` runs them in
 * reverse order once (later calls share the first run), trying every step even when one
 * fails, and then throws one Error listing what could not be cleaned up.
 */
export interface CleanupStack {
  push(fn: () => Promise<unknown>): void;
  close(): Promise<void>;
}

/** Creates an empty {@link CleanupStack}. */
export function cleanupStack(): CleanupStack {
  const steps: Array<() => Promise<unknown>> = [];
  let closing: Promise<void> | undefined;
  return {
    push: (fn) => {
      steps.push(fn);
    },
    close: () =>
      (closing ??= (async () => {
        const errors: string[] = [];
        for (const fn of steps.splice(0).reverse()) {
          try {
            await fn();
          } catch (e) {
            errors.push((e as Error).message);
          }
        }
        if (errors.length) throw new Error(`node cleanup incomplete:\n${errors.join('\n')}`);
      })()),
  };
}
