/**
 * Fault injection knobs of the simulated cloud: per-action latency, token-bucket
 * throttling per action class (`RequestLimitExceeded`, as EC2 throttles per account and
 * per class: AWS EC2 Developer Guide, "Request throttling"), injected error codes,
 * IMDS lag after changes, and ENI attach/detach transition delays.
 * The JSON form accepted by `POST /_sim/faults` is {@link FaultConfigSchema}.
 */
import { GarbageConfigSchema, GarbageKnobs } from './garbage.js';
import { z } from 'zod';

/** A fixed latency in ms, or uniform in [min, max] ms. */
export type LatencySpec = number | { min: number; max: number };

/** Token bucket settings: `burst` tokens at most, refilled at `refillPerSecond` tokens/s. */
export interface BucketSpec {
  burst: number;
  refillPerSecond: number;
}

/** EC2 throttling classes: `describe` (Describe*) and `mutating` (everything else). */
export type ActionClass = 'describe' | 'mutating';

/**
 * Changes after which IMDS may lag behind EC2. (`delete` is accepted for symmetry; only
 * detached ENIs can be deleted and IMDS never lists those, so it has no visible effect.)
 */
export type ImdsChangeKind = 'attach' | 'detach' | 'assign' | 'unassign' | 'delete';

/**
 * Pseudo error code of an injected fault that gets no answer at all: the sim holds the
 * request open until the client gives up (its timeout), as a lost response would look.
 * Recorded in the call log with this code.
 */
export const NO_RESPONSE = 'NoResponse';

/**
 * An injected error: the next `count` calls of `action` fail with `code` (an EC2 error
 * code answered with its AWS HTTP status, or {@link NO_RESPONSE}).
 * - `when: 'before'` (default): EC2 does nothing and fails the call;
 * - `when: 'after'`: EC2 performs the action, then fails the call (a 5xx or a timeout
 *   whose outcome the client cannot know: "did it happen or not?").
 * - `laterPagesOnly`: only calls that carry a `NextToken` match (a Describe* that fails
 *   part-way through its pages: a partial describe).
 */
export interface InjectedError {
  action: string;
  code: string;
  count: number;
  message?: string;
  when?: 'before' | 'after';
  laterPagesOnly?: boolean;
}

/** What a call that drew an injected fault must do. */
export interface DrawnFault {
  code: string;
  message: string;
  when: 'before' | 'after';
}

const latencySchema = z.union([
  z.number().nonnegative(),
  z.object({ min: z.number().nonnegative(), max: z.number().nonnegative() }),
]);
const bucketSchema = z.object({ burst: z.number().positive(), refillPerSecond: z.number().nonnegative() });

/** Body of `POST /_sim/faults`; every key optional; `reset: true` clears all knobs first. */
export const FaultConfigSchema = z
  .object({
    reset: z.boolean().optional(),
    latency: z.record(z.string(), z.union([latencySchema, z.null()])).optional(),
    throttle: z
      .object({
        describe: z.union([bucketSchema, z.null()]).optional(),
        mutating: z.union([bucketSchema, z.null()]).optional(),
      })
      .optional(),
    errors: z
      .array(
        z.object({
          action: z.string().min(1),
          code: z.string().min(1),
          count: z.number().int().positive(),
          message: z.string().optional(),
          when: z.enum(['before', 'after']).optional(),
          laterPagesOnly: z.boolean().optional(),
        }),
      )
      .optional(),
    /** Largest page any Describe* answers with (null clears): forces pagination with few resources. */
    describePageSize: z.union([z.number().int().positive(), z.null()]).optional(),
    imdsLagMs: z
      .partialRecord(z.enum(['attach', 'detach', 'assign', 'unassign', 'delete']), z.number().nonnegative())
      .optional(),
    attachmentDelays: z
      .object({ attachMs: z.number().nonnegative().optional(), detachMs: z.number().nonnegative().optional() })
      .optional(),
    garbage: GarbageConfigSchema.optional(),
  })
  .strict();

/** Parsed {@link FaultConfigSchema}. */
export type FaultConfig = z.infer<typeof FaultConfigSchema>;

/** Class of an EC2 action for throttling. */
export function actionClass(action: string): ActionClass {
  return action.startsWith('Describe') ? 'describe' : 'mutating';
}

interface Bucket extends BucketSpec {
  tokens: number;
  lastRefill: number;
}

/** Holds and applies the knobs. All times in ms; `now` is injectable for tests. */
export class FaultInjector {
  private latency = new Map<string, LatencySpec>();
  private buckets = new Map<ActionClass, Bucket>();
  private injected: InjectedError[] = [];
  private imdsLag = new Map<ImdsChangeKind, number>();
  /** ms from AttachNetworkInterface until the attachment is `attached` (0 = at once). */
  attachDelayMs = 0;
  /** Garbage answers (IMDS bodies, EC2 addresses): sim/garbage.ts. */
  readonly garbage = new GarbageKnobs();
  /** ms from DetachNetworkInterface until the ENI is `available` (0 = at once). */
  detachDelayMs = 0;
  /** Largest page a Describe* answers with (undefined = as the request asks). */
  describePageSize?: number;

  constructor(private readonly now: () => number = Date.now) {}

  /** Sets the latency of `action` (`'*'` = every action without its own); 0 or null clears it. */
  setLatency(action: string, spec: LatencySpec | null): void {
    if (spec === null || spec === 0) this.latency.delete(action);
    else this.latency.set(action, spec);
  }

  /** The delay in ms to apply to one call of `action` (0 when none). */
  latencyFor(action: string): number {
    const s = this.latency.get(action) ?? this.latency.get('*');
    if (s === undefined) return 0;
    if (typeof s === 'number') return s;
    return s.min + Math.random() * Math.max(0, s.max - s.min);
  }

  /** Enables a token bucket for an action class (null disables throttling for it). The bucket starts full. */
  setThrottle(cls: ActionClass, spec: BucketSpec | null): void {
    if (!spec) this.buckets.delete(cls);
    else this.buckets.set(cls, { ...spec, tokens: spec.burst, lastRefill: this.now() });
  }

  /** Takes one token for `action`; false means the call is throttled. */
  takeToken(action: string): boolean {
    const b = this.buckets.get(actionClass(action));
    if (!b) return true;
    const t = this.now();
    b.tokens = Math.min(b.burst, b.tokens + ((t - b.lastRefill) / 1000) * b.refillPerSecond);
    b.lastRefill = t;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  /** Queues an injected error (errors for one action are used in order). */
  injectError(e: InjectedError): void {
    this.injected.push({ ...e });
  }

  /**
   * Consumes one injected error for `action`, if any is pending and matches.
   * @param call.laterPage true when the request carries a NextToken.
   */
  takeInjectedError(action: string, call: { laterPage?: boolean } = {}): DrawnFault | undefined {
    const e = this.injected.find(
      (x) => x.action === action && x.count > 0 && (!x.laterPagesOnly || call.laterPage === true),
    );
    if (!e) return undefined;
    e.count -= 1;
    if (e.count === 0) this.injected = this.injected.filter((x) => x !== e);
    return { code: e.code, message: e.message ?? `Injected fault: ${e.code}`, when: e.when ?? 'before' };
  }

  /** Caps every Describe* page at `n` items (null: no cap). @throws RangeError for n < 1. */
  setDescribePageSize(n: number | null): void {
    if (n !== null && !(Number.isInteger(n) && n >= 1))
      throw new RangeError(`describePageSize must be a whole number >= 1, got ${n}`);
    this.describePageSize = n ?? undefined;
  }

  /** Number of injected failures still pending (all actions). */
  pendingInjectedErrors(): number {
    return this.injected.reduce((n, e) => n + e.count, 0);
  }

  /** Sets how long (ms) IMDS keeps showing the old view after a change of `kind`. */
  setImdsLag(kind: ImdsChangeKind, ms: number): void {
    if (ms > 0) this.imdsLag.set(kind, ms);
    else this.imdsLag.delete(kind);
  }

  /** IMDS lag in ms for a change kind (0 = none). */
  imdsLagFor(kind: ImdsChangeKind): number {
    return this.imdsLag.get(kind) ?? 0;
  }

  /** Sets attach/detach transition delays in ms (undefined keeps the current value). */
  setAttachmentDelays(p: { attachMs?: number; detachMs?: number }): void {
    if (p.attachMs !== undefined) this.attachDelayMs = p.attachMs;
    if (p.detachMs !== undefined) this.detachDelayMs = p.detachMs;
  }

  /** Clears every knob. */
  reset(): void {
    this.latency.clear();
    this.buckets.clear();
    this.injected = [];
    this.imdsLag.clear();
    this.attachDelayMs = 0;
    this.detachDelayMs = 0;
    this.describePageSize = undefined;
    this.garbage.reset();
  }

  /**
   * Applies a JSON config (the body of `POST /_sim/faults`).
   * @throws Error with the validation message when the body does not match {@link FaultConfigSchema}.
   */
  configure(body: unknown): void {
    const r = FaultConfigSchema.safeParse(body);
    if (!r.success)
      throw new Error(
        `invalid fault config: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      );
    const c = r.data;
    if (c.reset) this.reset();
    for (const [action, spec] of Object.entries(c.latency ?? {})) this.setLatency(action, spec);
    if (c.throttle) {
      for (const cls of ['describe', 'mutating'] as const) {
        const v = c.throttle[cls];
        if (v !== undefined) this.setThrottle(cls, v);
      }
    }
    for (const e of c.errors ?? []) this.injectError(e);
    for (const [k, ms] of Object.entries(c.imdsLagMs ?? {})) this.setImdsLag(k as ImdsChangeKind, ms);
    if (c.attachmentDelays) this.setAttachmentDelays(c.attachmentDelays);
    if (c.describePageSize !== undefined) this.setDescribePageSize(c.describePageSize);
    if (c.garbage) this.garbage.configure(c.garbage);
  }

  /** JSON view of the current knobs. */
  snapshot(): Record<string, unknown> {
    return {
      latency: Object.fromEntries(this.latency),
      throttle: Object.fromEntries(
        [...this.buckets].map(([k, b]) => [
          k,
          { burst: b.burst, refillPerSecond: b.refillPerSecond, tokens: b.tokens },
        ]),
      ),
      errors: this.injected.map((e) => ({ ...e })),
      imdsLagMs: Object.fromEntries(this.imdsLag),
      attachmentDelays: { attachMs: this.attachDelayMs, detachMs: this.detachDelayMs },
      describePageSize: this.describePageSize ?? null,
      garbage: this.garbage.snapshot(),
    };
  }
}
