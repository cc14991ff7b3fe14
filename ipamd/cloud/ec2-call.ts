/**
 * The one EC2 client wrapper of ipamd, and the implementation of the {@link Ec2Port} (the
 * narrow part the controller uses) that ipamd runs with: every EC2 call goes through {@link Ec2Api}, which
 * normalises the SDK shapes, maps errors to {@link Ec2Error} with the EC2 error code
 * (AWS EC2 API Reference, "Error codes"), and spends the node's EC2 budget carefully:
 *
 * - every attempt takes a token from a node-local bucket ({@link Ec2Budget}:
 *   `ENI_IPAM_EC2_RATE` calls/s, `ENI_IPAM_EC2_BURST`) and waits out any back-off hold;
 * - throttling (`RequestLimitExceeded`...) and server errors (5xx) put a jittered,
 *   exponentially growing hold on the action class and are retried (server errors and
 *   timeouts only for actions that are safe to repeat: see `retry.ts`);
 * - each attempt has its own timeout (`ENI_IPAM_EC2_TIMEOUT`, see ./attempt-signal.ts);
 * - each attempt is reported to `observe` with its action, outcome and latency.
 *
 * Retries are ours, not the SDK's: the SDK client runs with `maxAttempts: 1`. Two retry
 * layers would multiply (SDK attempts × ours) into a retry storm, SDK retries would
 * bypass the node-local bucket and the per-attempt metrics, and the SDK's backoff is
 * per call, while ours is shared by every call of the class.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { EC2Client } from '@aws-sdk/client-ec2';
import { attemptSignal } from './attempt-signal.js';
import { Ec2Budget } from './ec2-budget.js';
import {
  DEFAULT_EC2_BURST,
  DEFAULT_EC2_MAX_ATTEMPTS,
  DEFAULT_EC2_RATE,
  DEFAULT_EC2_TIMEOUT_MS,
  type Ec2ApiOptions,
  type Ec2CallOptions,
} from './ec2-options.js';
import { Ec2Error } from './ec2-port.js';

/**
 * The SDK's client and the commands ipamd uses (./ec2-sdk.ts, a tree-shaken bundle after
 * `npm run build`: ~6 MiB of resident memory instead of the whole SDK's ~45), loaded on
 * the first EC2 call.
 */
type Sdk = typeof import('./ec2-sdk.js');
let sdkModule: Promise<Sdk> | undefined;
const loadSdk = (): Promise<Sdk> => (sdkModule ??= import('./ec2-sdk.js'));

/**
 * The EC2 call machinery under {@link Ec2Api} (./ec2.ts): the lazily loaded SDK client and
 * one call with the node's budget, retries and per-attempt timeouts (see the module docstring).
 * Subclasses add the operations; it has none of its own.
 */
export class Ec2Caller {
  /** The SDK client, made on the first call (see `loadSdk`). */
  private client?: EC2Client;
  /** The node's EC2 budget (token bucket + back-off holds). */
  readonly budget: Ec2Budget;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  protected readonly o: Ec2ApiOptions;
  private readonly closing = new AbortController();

  /** @throws RangeError for a rate ≤ 0, a burst < 1, maxAttempts < 1 or timeoutMs ≤ 0. */
  constructor(opts: Ec2ApiOptions) {
    this.o = opts;
    this.maxAttempts = opts.maxAttempts ?? DEFAULT_EC2_MAX_ATTEMPTS;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_EC2_TIMEOUT_MS;
    if (!Number.isInteger(this.maxAttempts) || this.maxAttempts < 1)
      throw new RangeError(`maxAttempts must be a whole number >= 1, got ${this.maxAttempts}`);
    if (!(this.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${this.timeoutMs}`);
    this.budget = new Ec2Budget({
      ratePerSecond: opts.ratePerSecond ?? DEFAULT_EC2_RATE,
      burst: opts.burst ?? DEFAULT_EC2_BURST,
      ...(opts.backoff ? { backoff: opts.backoff } : {}),
    });
  }

  /** Runs `fn` with the SDK client and module, loading them on first use. */
  protected async sdk<T>(fn: (c: EC2Client, m: Sdk) => Promise<T>): Promise<T> {
    const m = await loadSdk();
    this.client ??= new m.EC2Client({
      region: this.o.region,
      ...(this.o.endpoint ? { endpoint: this.o.endpoint } : {}),
      maxAttempts: 1,
    });
    return fn(this.client, m);
  }

  /**
   * Aborts calls waiting for a token or a back-off hold and calls in flight (they fail
   * with code `Aborted`); later calls fail at once. For shutdown.
   */
  close(): void {
    this.closing.abort();
  }

  /**
   * One EC2 call with the budget, retries and per-attempt timeouts described in the
   * module docstring; `opts` override the attempt budget for this call.
   * @throws Ec2Error with the last attempt's code.
   */
  protected async call<T>(
    action: string,
    send: (o: { abortSignal: AbortSignal }) => Promise<T>,
    opts?: Ec2CallOptions,
  ): Promise<T> {
    const maxAttempts = opts?.maxAttempts ?? this.maxAttempts;
    for (let attempt = 1; ; attempt++) {
      if (this.closing.signal.aborted) throw aborted(action, attempt);
      const waitMs = this.budget.reserve(action);
      if (waitMs > 0) {
        this.o.onWait?.(action, waitMs);
        try {
          await sleep(waitMs, undefined, { signal: this.closing.signal });
        } catch {
          throw aborted(action, attempt);
        }
      }
      const t0 = performance.now();
      const attemptAbort = attemptSignal(this.timeoutMs, this.closing.signal);
      try {
        const out = await send({ abortSignal: attemptAbort.signal });
        this.budget.onSuccess(action);
        this.o.observe?.(action, 'ok', performance.now() - t0, { attempt, httpStatus: 200 });
        return out;
      } catch (e) {
        const ms = performance.now() - t0;
        const err = e as {
          name?: string;
          Code?: string;
          code?: string;
          message?: string;
          $metadata?: { httpStatusCode?: number };
        };
        const code =
          err.Code ??
          (err.$metadata?.httpStatusCode === undefined && typeof err.code === 'string' ? err.code : undefined) ??
          err.name ??
          'UnknownError';
        const status = err.$metadata?.httpStatusCode;
        const v = this.budget.onFailure(action, code, status, attempt, maxAttempts);
        this.o.observe?.(action, code, ms, {
          attempt,
          kind: v.kind,
          ...(status !== undefined ? { httpStatus: status } : {}),
        });
        if (v.retry && !this.closing.signal.aborted) {
          this.o.onRetry?.(action, code, attempt, v.holdMs);
          opts?.onRetry?.(code, attempt, v.holdMs);
          continue;
        }
        const out = new Ec2Error(action, code, err.message ?? String(e), status);
        out.attempts = attempt;
        out.kind = v.kind;
        throw out;
      } finally {
        attemptAbort.done();
      }
    }
  }
}

function aborted(action: string, attempt: number): Ec2Error {
  const e = new Ec2Error(action, 'Aborted', 'the EC2 client was closed');
  e.attempts = attempt;
  return e;
}
