/**
 * The abort signal of one EC2 attempt: its own timeout, or the client's shutdown.
 */

/** A signal for one attempt and the function that retires it. */
export interface AttemptSignal {
  signal: AbortSignal;
  /** Clears the timer and the listener on the parent; call once the attempt has ended. */
  done(): void;
}

/**
 * A signal that aborts after `timeoutMs` (reason: a `DOMException` named `TimeoutError`,
 * as `AbortSignal.timeout` gives) or when `parent` aborts (its reason), whichever is first.
 *
 * Not `AbortSignal.any([AbortSignal.timeout(ms), parent])`: on Node 20 the timeout
 * signal inside `any()` is held only weakly, and a garbage collection during the attempt
 * collects it and cancels its timer (nodejs/node#57736). An attempt with no answer then
 * never times out and the EC2 call hangs for as long as the connection stays open.
 *
 * @param timeoutMs the attempt's timeout in ms (> 0); @param parent the client's shutdown signal.
 */
export function attemptSignal(timeoutMs: number, parent: AbortSignal): AttemptSignal {
  const ac = new AbortController();
  const onParent = (): void => ac.abort(parent.reason);
  const timer = setTimeout(
    () => ac.abort(new DOMException(`the attempt timed out after ${timeoutMs} ms`, 'TimeoutError')),
    timeoutMs,
  );
  if (parent.aborted) onParent();
  else parent.addEventListener('abort', onParent, { once: true });
  return {
    signal: ac.signal,
    done() {
      clearTimeout(timer);
      parent.removeEventListener('abort', onParent);
    },
  };
}
