/**
 * The node's EC2 call budget: one {@link TokenBucket} for every call (ENI_IPAM_EC2_RATE /
 * ENI_IPAM_EC2_BURST) plus a shared back-off *hold* per EC2 action class. Pure: no
 * timers; clock and randomness are injected, so every decision is unit-testable.
 *
 * Why a shared hold and not only per-call retries: the pool controller starts a fresh
 * call on its next step, so per-call backoff alone would let new calls keep hitting a
 * throttled API. After a throttle or a server error, every call of that class (EC2
 * throttles `Describe*` and mutating actions in separate buckets: AWS EC2 Developer
 * Guide, "Request throttling") waits until the hold expires, and the hold doubles with
 * each consecutive failure of the class until a call succeeds.
 */
import { monoNow } from '../clock.js';
import {
  backoffDelay,
  classifyEc2Failure,
  DEFAULT_BACKOFF,
  isRetryable,
  type BackoffPolicy,
  type Ec2FailureKind,
} from './retry.js';
import { TokenBucket } from './token-bucket.js';

/** EC2 action class: `describe` (Describe*) or `mutating` (everything else). */
export type Ec2ActionClass = 'describe' | 'mutating';

/** Class of an EC2 action. */
export function ec2ActionClass(action: string): Ec2ActionClass {
  return action.startsWith('Describe') ? 'describe' : 'mutating';
}

/** Options of {@link Ec2Budget}. */
export interface Ec2BudgetOptions {
  /** Node-local call rate (calls/s, > 0). */
  ratePerSecond: number;
  /** Node-local burst (calls, ≥ 1). */
  burst: number;
  backoff?: BackoffPolicy;
  /** Clock in ms (default monoNow, ipamd/clock.ts). */
  now?: () => number;
  /** Uniform in [0, 1) (default Math.random). */
  random?: () => number;
}

/** What to do after a failed attempt. */
export interface Ec2FailureVerdict {
  kind: Ec2FailureKind;
  /** True if the same request may be sent again (attempts left and the failure allows it). */
  retry: boolean;
  /** Back-off hold put on the action's class (ms, 0 for client errors). */
  holdMs: number;
}

interface ClassState {
  holdUntil: number;
  consecutive: number;
}

/** Token bucket + per-class back-off holds. */
export class Ec2Budget {
  private readonly bucket: TokenBucket;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly backoff: BackoffPolicy;
  private readonly classes = new Map<Ec2ActionClass, ClassState>();

  /** @throws RangeError for a rate ≤ 0 or a burst < 1. */
  constructor(o: Ec2BudgetOptions) {
    this.now = o.now ?? monoNow;
    this.random = o.random ?? Math.random;
    this.backoff = o.backoff ?? DEFAULT_BACKOFF;
    this.bucket = new TokenBucket({ ratePerSecond: o.ratePerSecond, burst: o.burst, now: this.now });
  }

  /**
   * Reserves a token for one attempt of `action` and returns how long (ms, ≥ 0) to wait
   * before sending it: the longer of the token's turn and the class's back-off hold.
   */
  reserve(action: string): number {
    const tokenWait = this.bucket.reserve();
    const hold = (this.classes.get(ec2ActionClass(action))?.holdUntil ?? 0) - this.now();
    return Math.max(tokenWait, hold, 0);
  }

  /** Records a success: the class's consecutive-failure count is reset (the hold stays until it expires). */
  onSuccess(action: string): void {
    const s = this.classes.get(ec2ActionClass(action));
    if (s) s.consecutive = 0;
  }

  /**
   * Records a failed attempt and decides whether to retry.
   * @param attempt 1-based number of the attempt that failed; @param maxAttempts attempts allowed per call.
   */
  onFailure(
    action: string,
    code: string,
    httpStatus: number | undefined,
    attempt: number,
    maxAttempts: number,
  ): Ec2FailureVerdict {
    const kind = classifyEc2Failure(code, httpStatus);
    let holdMs = 0;
    if (kind !== 'client') {
      const cls = ec2ActionClass(action);
      const s = this.classes.get(cls) ?? { holdUntil: 0, consecutive: 0 };
      s.consecutive += 1;
      holdMs = backoffDelay(s.consecutive, this.backoff, this.random);
      s.holdUntil = Math.max(s.holdUntil, this.now() + holdMs);
      this.classes.set(cls, s);
    }
    return { kind, retry: attempt < maxAttempts && isRetryable(action, kind), holdMs };
  }

  /** Remaining hold of a class (ms, 0 when none), for status and tests. */
  holdRemaining(cls: Ec2ActionClass): number {
    return Math.max((this.classes.get(cls)?.holdUntil ?? 0) - this.now(), 0);
  }
}
