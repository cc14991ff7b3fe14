/**
 * Remembers when EC2 last throttled ipamd (RequestLimitExceeded and the other codes of
 * retry.ts THROTTLE_CODES), so an ADD that gets no address while a grow is still retrying
 * through the throttle can say so (docs/design.md#cni-errors) instead of "no free IP".
 * Monotonic time (performance.now), never the wall clock.
 */
import type { Ec2CallObserver } from './ec2-options.js';
import { THROTTLE_CODES } from './retry.js';

/** The watch: an observer to chain into the EC2 client, and the question it answers. */
export interface ThrottleWatch {
  /** Chains `next` (e.g. the metrics' observer) after noting throttled attempts. */
  observe(next?: Ec2CallObserver): Ec2CallObserver;
  /** True when an EC2 attempt was throttled within the last `withinMs` ms. */
  throttledWithin(withinMs: number): boolean;
}

/** A new watch; `now` is a monotonic clock in ms (default performance.now). */
export function createThrottleWatch(now: () => number = () => performance.now()): ThrottleWatch {
  let last = Number.NEGATIVE_INFINITY;
  return {
    observe: (next) => (action, outcome, ms, info) => {
      if (THROTTLE_CODES.has(outcome)) last = now();
      next?.(action, outcome, ms, info);
    },
    throttledWithin: (withinMs) => now() - last <= withinMs,
  };
}
