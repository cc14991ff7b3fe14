/**
 * Which EC2 failures are worth retrying, and how long to back off: pure functions, no
 * timers, randomness injected.
 *
 * Classification follows the AWS EC2 API Reference ("Error codes": `RequestLimitExceeded`
 * is throttling; `InternalError`, `InternalFailure`, `ServiceUnavailable`, `Unavailable`
 * and any 5xx are server errors) and the AWS SDKs' retry behaviour guide (throttling and
 * transient errors are retried with exponential backoff and jitter). The delay uses
 * "equal jitter" from the AWS Architecture Blog post "Exponential Backoff And Jitter":
 * half the exponential step is kept, so every retry really waits, and the other half is
 * random, so many nodes throttled together do not retry in lock step.
 */

/** What kind of failure an EC2 error is. */
export type Ec2FailureKind =
  /** EC2 refused the request before doing anything (the request was not executed). */
  | 'throttle'
  /** A 5xx: the request may or may not have been executed. */
  | 'server'
  /** No HTTP answer (timeout, connection reset/refused): may or may not have been executed. */
  | 'transport'
  /** A client error (4xx): retrying the same request gives the same answer. */
  | 'client';

/** Error codes EC2 and the AWS SDKs use for throttling. */
export const THROTTLE_CODES: ReadonlySet<string> = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'TooManyRequestsException',
  'SlowDown',
  'PriorRequestNotComplete',
  'EC2ThrottledException',
]);

/** Server-side error codes (AWS EC2 API Reference, "Server error codes"). */
export const SERVER_CODES: ReadonlySet<string> = new Set([
  'InternalError',
  'InternalFailure',
  'ServiceUnavailable',
  'Unavailable',
]);

/** Codes (or error names) of requests that got no HTTP answer. */
export const TRANSPORT_CODES: ReadonlySet<string> = new Set([
  'TimeoutError',
  'AbortError',
  'RequestTimeout',
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'NetworkingError',
]);

/**
 * Classifies an EC2 failure.
 * @param code EC2 error code or JS error name/code; @param httpStatus HTTP status when an answer came.
 */
export function classifyEc2Failure(code: string, httpStatus?: number): Ec2FailureKind {
  if (THROTTLE_CODES.has(code) || httpStatus === 429) return 'throttle';
  if (SERVER_CODES.has(code) || (httpStatus !== undefined && httpStatus >= 500)) return 'server';
  if (TRANSPORT_CODES.has(code) || httpStatus === undefined) return 'transport';
  return 'client';
}

/**
 * Actions that must not be repeated after a failure that may have been executed
 * (`server`, `transport`): a second CreateNetworkInterface would create a second ENI,
 * a second AssignPrivateIpAddresses (by count) more addresses, and a second
 * AttachNetworkInterface races the first. They are retried on throttling only (EC2 did
 * nothing); for the rest the pool controller re-plans from its state on the next step.
 */
export const NOT_IDEMPOTENT: ReadonlySet<string> = new Set([
  'CreateNetworkInterface',
  'AssignPrivateIpAddresses',
  'AttachNetworkInterface',
]);

/** True if a failure of `kind` on `action` may be retried with the same request. */
export function isRetryable(action: string, kind: Ec2FailureKind): boolean {
  if (kind === 'throttle') return true;
  if (kind === 'client') return false;
  return !NOT_IDEMPOTENT.has(action);
}

/** Exponential backoff settings, in ms. */
export interface BackoffPolicy {
  /** Step of the first retry (ms, > 0). */
  baseMs: number;
  /** Largest step (ms ≥ baseMs). */
  capMs: number;
}

/** Default backoff: 0.5 s doubling to at most 20 s (the AWS SDK's standard cap). */
export const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 500, capMs: 20_000 };

/**
 * Delay before retry number `n` (n ≥ 1), in ms, with equal jitter:
 * `step = min(cap, base × 2^(n−1))`, `delay = step/2 + random() × step/2`.
 * @param random uniform in [0, 1) (default Math.random). @throws RangeError for n < 1.
 */
export function backoffDelay(
  n: number,
  p: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  if (!(n >= 1)) throw new RangeError(`retry number must be >= 1, got ${n}`);
  const step = Math.min(p.capMs, p.baseMs * 2 ** Math.min(n - 1, 30));
  return Math.round(step / 2 + random() * (step / 2));
}
