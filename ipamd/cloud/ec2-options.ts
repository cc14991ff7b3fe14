/**
 * Shapes and defaults of the EC2 client ({@link Ec2Api} in ./ec2.ts): its options, per-call
 * overrides, observers and the instance-type limits it returns.
 */
import type { ParseErrorObserver } from './answer-parse.js';
import type { BackoffPolicy, Ec2FailureKind } from './retry.js';

/** Network limits of an instance type (DescribeInstanceTypes `NetworkInfo`). */
export interface InstanceTypeLimits {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  /** `nitro`, `xen`, or `unknown` (bare metal types report none). */
  hypervisor: string;
  /** A bare metal type (no hypervisor; built on the Nitro System). */
  bareMetal: boolean;
}

/** Details of one EC2 attempt given to {@link Ec2CallObserver}. */
export interface Ec2CallInfo {
  /** 1-based attempt number within the call. */
  attempt: number;
  /** HTTP status of the answer (undefined when none came: timeout, connection error). */
  httpStatus?: number;
  /** Failure kind (undefined on success). */
  kind?: Ec2FailureKind;
}

/**
 * Counter hook: called once per EC2 *attempt* (retries included) with the action, the
 * outcome ("ok" or the error code) and the latency in ms (the wire time, without the
 * wait for a token).
 */
export type Ec2CallObserver = (action: string, outcome: string, ms: number, info?: Ec2CallInfo) => void;

/** Called before an attempt is retried: the failure code, the attempt that failed and the back-off in ms. */
export type Ec2RetryObserver = (action: string, code: string, attempt: number, delayMs: number) => void;

/** Called when an attempt had to wait (ms) for a token or a back-off hold before it was sent. */
export type Ec2WaitObserver = (action: string, waitMs: number) => void;

/** Default node-local EC2 call rate (calls/s). */
export const DEFAULT_EC2_RATE = 5;
/** Default node-local EC2 burst (calls). */
export const DEFAULT_EC2_BURST = 20;
/** Default attempts per call, the first included. */
export const DEFAULT_EC2_MAX_ATTEMPTS = 5;
/** Default timeout of one attempt (ms). */
export const DEFAULT_EC2_TIMEOUT_MS = 10_000;

/** Options of {@link Ec2Api}. */
export interface Ec2ApiOptions {
  region: string;
  /** AWS_EC2_ENDPOINT; unset = the SDK's regional endpoint. */
  endpoint?: string;
  /** Attempts per call, the first included (default {@link DEFAULT_EC2_MAX_ATTEMPTS}); the SDK itself makes one. */
  maxAttempts?: number;
  /** Timeout of one attempt in ms (default {@link DEFAULT_EC2_TIMEOUT_MS}). */
  timeoutMs?: number;
  /** Node-local call rate in calls/s (default {@link DEFAULT_EC2_RATE}). */
  ratePerSecond?: number;
  /** Node-local burst in calls (default {@link DEFAULT_EC2_BURST}). */
  burst?: number;
  /** Back-off steps (default 0.5 s doubling to 20 s). */
  backoff?: BackoffPolicy;
  observe?: Ec2CallObserver;
  /** Told of each answer refused because a field does not parse (answer-parse.ts; ipamd: warn log + metric). */
  onParseError?: ParseErrorObserver;
  onRetry?: Ec2RetryObserver;
  onWait?: Ec2WaitObserver;
}

/**
 * Per-call overrides of {@link Ec2Api}'s retry policy (start-up discovery gives its few
 * reads a larger, still bounded, attempt budget so a fleet-wide throttling storm does
 * not fail the start, without a second retry layer on top).
 */
export interface Ec2CallOptions {
  /** Attempts for this call, the first included (default: the client's `maxAttempts`). */
  maxAttempts?: number;
  /** Called before each retry of this call (after the client-wide `onRetry`). */
  onRetry?: (code: string, attempt: number, delayMs: number) => void;
}
