/**
 * Deduplication and rate limiting of the Kubernetes Events ipamd writes (pure: times are
 * passed in, ms since the epoch). Modelled on client-go's event correlator
 * (k8s.io/client-go/tools/record/events_cache.go), simplified:
 *
 * - **Dedup**: the same involved object + reason within `windowMs` (default 10 min) of its
 *   last occurrence is the same Event: its `count` grows, `lastTimestamp` and `message`
 *   follow the newest occurrence (one series, as kubelet's recorder shows "x5 over 2m").
 * - **Rate limit**: one Event object is written (created or patched) at most once per
 *   `minWriteIntervalMs` (default 10 s); occurrences in between only bump the count the
 *   next write carries. Writes across all Events share a token bucket (`burst`, refilled
 *   one token per `refillMs`).
 * - **Bounded**: at most `maxEntries` Events are tracked; an occurrence for a new key
 *   beyond that is dropped (counted in {@link EventBook.dropped}), never queued.
 */

/** The object an Event is about (core/v1 ObjectReference, trimmed). */
export interface InvolvedObject {
  kind: 'Pod' | 'Node';
  name: string;
  namespace?: string;
  uid?: string;
}

/** One occurrence to record. */
export interface EventOccurrence {
  involved: InvolvedObject;
  /** Event namespace: the pod's, or `default` for a Node (as kubelet does). */
  namespace: string;
  type: 'Normal' | 'Warning';
  /** CamelCase reason, e.g. FailedIPAllocation. */
  reason: string;
  message: string;
}

/** A write the sender must make. `name` is undefined until the Event was created. */
export interface EventWrite {
  key: string;
  op: 'create' | 'patch';
  name?: string;
  occurrence: EventOccurrence;
  count: number;
  firstTimestamp: number;
  lastTimestamp: number;
}

interface Entry {
  occurrence: EventOccurrence;
  count: number;
  first: number;
  last: number;
  name?: string;
  /** Count already written to the API. */
  written: number;
  lastWriteAt: number;
  inFlight: boolean;
}

/** Tuning of {@link EventBook} (ms, counts). */
export interface EventBookOptions {
  windowMs?: number;
  minWriteIntervalMs?: number;
  burst?: number;
  refillMs?: number;
  maxEntries?: number;
}

/** Key of an occurrence: involved object + reason. */
export function eventKey(o: EventOccurrence): string {
  const i = o.involved;
  return `${i.kind}/${i.namespace ?? ''}/${i.name}/${i.uid ?? ''}/${o.reason}`;
}

/** The book; see the module docstring. */
export class EventBook {
  private readonly entries = new Map<string, Entry>();
  private readonly windowMs: number;
  private readonly minWriteIntervalMs: number;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxEntries: number;
  private tokens: number;
  private refilledAt?: number;
  /** Occurrences dropped because the book was full. */
  dropped = 0;

  constructor(o: EventBookOptions = {}) {
    this.windowMs = o.windowMs ?? 600_000;
    this.minWriteIntervalMs = o.minWriteIntervalMs ?? 10_000;
    this.burst = o.burst ?? 25;
    this.refillMs = o.refillMs ?? 2_000;
    this.maxEntries = o.maxEntries ?? 256;
    this.tokens = this.burst;
  }

  /** Records an occurrence at `now`. Returns false when it was dropped (book full). */
  observe(o: EventOccurrence, now: number): boolean {
    this.expire(now);
    const key = eventKey(o);
    const e = this.entries.get(key);
    if (e && now - e.last < this.windowMs) {
      e.count++;
      e.last = now;
      e.occurrence = o;
      return true;
    }
    if (!e && this.entries.size >= this.maxEntries) {
      this.dropped++;
      return false;
    }
    // A new series (or the old one's window ran out): a new Event object.
    this.entries.set(key, {
      occurrence: o,
      count: 1,
      first: now,
      last: now,
      written: 0,
      lastWriteAt: -Infinity,
      inFlight: false,
    });
    return true;
  }

  /**
   * The next write due at `now` (taking a token), or undefined when none is due or the
   * bucket is empty. `nextDueIn` tells when to ask again.
   */
  take(now: number): EventWrite | undefined {
    this.refill(now);
    if (this.tokens < 1) return undefined;
    for (const [key, e] of this.entries) {
      if (e.inFlight || e.written === e.count || now - e.lastWriteAt < this.minWriteIntervalMs) continue;
      this.tokens--;
      e.inFlight = true;
      e.lastWriteAt = now;
      return {
        key,
        op: e.name ? 'patch' : 'create',
        ...(e.name ? { name: e.name } : {}),
        occurrence: e.occurrence,
        count: e.count,
        firstTimestamp: e.first,
        lastTimestamp: e.last,
      };
    }
    return undefined;
  }

  /** ms until {@link take} may return a write (Infinity when nothing is pending). */
  nextDueIn(now: number): number {
    let best = Infinity;
    for (const e of this.entries.values()) {
      if (e.inFlight || e.written === e.count) continue;
      best = Math.min(best, Math.max(0, e.lastWriteAt + this.minWriteIntervalMs - now));
    }
    if (best === Infinity) return best;
    this.refill(now);
    return this.tokens >= 1 ? best : Math.max(best, this.refillMs - (now - (this.refilledAt ?? now)));
  }

  /** The write `w` succeeded; the Event's API name is `name`. */
  written(w: EventWrite, name: string): void {
    const e = this.entries.get(w.key);
    if (!e) return;
    e.inFlight = false;
    e.name = name;
    e.written = w.count;
  }

  /**
   * The write `w` failed. `gone`: the Event no longer exists (404 on a patch): the next
   * write creates it again. Otherwise the write is dropped (the next occurrence retries).
   */
  failed(w: EventWrite, gone: boolean): void {
    const e = this.entries.get(w.key);
    if (!e) return;
    e.inFlight = false;
    if (gone) delete e.name;
    else e.written = e.count;
  }

  /** Number of tracked Events. */
  get size(): number {
    return this.entries.size;
  }

  private refill(now: number): void {
    this.refilledAt ??= now;
    const add = Math.floor((now - this.refilledAt) / this.refillMs);
    if (add > 0) {
      this.tokens = Math.min(this.burst, this.tokens + add);
      this.refilledAt += add * this.refillMs;
    }
    if (this.tokens >= this.burst) this.refilledAt = now;
  }

  private expire(now: number): void {
    for (const [key, e] of this.entries)
      if (!e.inFlight && e.written === e.count && now - e.last >= this.windowMs) this.entries.delete(key);
  }
}
