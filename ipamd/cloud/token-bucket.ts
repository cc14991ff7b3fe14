/**
 * A node-local token bucket for EC2 calls (the client-side counterpart of EC2's own
 * request token buckets: AWS EC2 Developer Guide, "Request throttling for the Amazon
 * EC2 API"). Pure: no timers; time comes from an injectable clock in ms.
 *
 * Callers *reserve* a token and are told how long to wait for it. Tokens may go
 * negative, which queues callers in arrival order (FIFO) without any timer here: the
 * n-th caller past an empty bucket waits n / rate seconds.
 */
import { monoNow } from '../clock.js';

/** Options of {@link TokenBucket}. */
export interface TokenBucketOptions {
  /** Refill rate in tokens (calls) per second, > 0. */
  ratePerSecond: number;
  /** Bucket size in tokens, ≥ 1; the bucket starts full. */
  burst: number;
  /** Clock in ms (default `monoNow`, ipamd/clock.ts). */
  now?: () => number;
}

/** Token bucket with FIFO reservations. */
export class TokenBucket {
  readonly ratePerSecond: number;
  readonly burst: number;
  private readonly now: () => number;
  private tokens: number;
  private last: number;

  /** @throws RangeError when `ratePerSecond` is not > 0 or `burst` is not ≥ 1. */
  constructor(o: TokenBucketOptions) {
    if (!(o.ratePerSecond > 0) || !Number.isFinite(o.ratePerSecond))
      throw new RangeError(`ratePerSecond must be a finite number > 0, got ${o.ratePerSecond}`);
    if (!(o.burst >= 1) || !Number.isFinite(o.burst))
      throw new RangeError(`burst must be a finite number >= 1, got ${o.burst}`);
    this.ratePerSecond = o.ratePerSecond;
    this.burst = o.burst;
    this.now = o.now ?? monoNow;
    this.tokens = o.burst;
    this.last = this.now();
  }

  /** Tokens in the bucket now (negative while callers are queued). */
  available(): number {
    this.refill();
    return this.tokens;
  }

  /**
   * Takes one token and returns how long (ms, ≥ 0) the caller must wait before using
   * it: 0 when a token was in the bucket, otherwise the time until its turn comes.
   */
  reserve(): number {
    this.refill();
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.ratePerSecond) * 1000);
  }

  /** Takes a token only if one is in the bucket now; false leaves the bucket unchanged. */
  tryTake(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private refill(): void {
    const t = this.now();
    if (t > this.last) {
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSecond);
      this.last = t;
    }
  }
}
