/**
 * The EndpointSlices of the cluster reduced to what the cooldown needs (issue 41,
 * docs/design.md#cooldown-that-ends-on-evidence): which addresses some slice lists now,
 * when a change last removed one, and since when the view has been complete without a
 * break. Kept by the watch (endpointslice-watch.ts); read by the datastore through
 * {@link ReuseEvidence}. Memory only: per slice its addresses, per address a count; no
 * slice object is kept. Times are ms on ipamd's monotonic clock.
 *
 * What counts as listed (https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/):
 * every address of every endpoint of an `IPv4` or `IPv6` slice, whatever its conditions
 * (kube-proxy may still send to a terminating endpoint). `FQDN` slices name hosts, not pod
 * addresses, and kube-proxy ignores them: so are they here. An address that does not parse
 * as an IP (or a slice whose `addressType` is none of the three) makes the view unreadable
 * while that slice exists: nothing is reused early meanwhile. An IPv4-mapped IPv6 address
 * (`::ffff:a.b.c.d`) lists `a.b.c.d` too; an address of the other family than its slice
 * says is still listed.
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { EndpointListing, ReuseEvidence } from '../datastore/reuse-evidence.js';

/** The parts of a discovery.k8s.io/v1 EndpointSlice the index reads (everything else is ignored). */
export interface SliceLike {
  metadata?: { namespace?: string; name?: string };
  addressType?: string;
  endpoints?: Array<{ addresses?: unknown } | null> | null;
}

/** The addresses a slice lists, or why it cannot be read; `[]` for an FQDN slice. Pure. */
export function sliceAddresses(slice: SliceLike): { addresses: string[] } | { unreadable: string } {
  const type = slice.addressType;
  if (type === 'FQDN') return { addresses: [] };
  if (type !== 'IPv4' && type !== 'IPv6') return { unreadable: `addressType ${JSON.stringify(type)}` };
  const out = new Set<string>();
  for (const ep of slice.endpoints ?? []) {
    const addrs = ep?.addresses;
    if (!Array.isArray(addrs)) return { unreadable: 'an endpoint without an addresses list' };
    for (const a of addrs) {
      if (typeof a !== 'string') return { unreadable: `address ${JSON.stringify(a)}` };
      if (isIPv4(a)) out.add(a);
      else if (isIPv6(a)) {
        out.add(a.toLowerCase());
        const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(a);
        if (mapped && isIPv4(mapped[1]!)) out.add(mapped[1]!);
      } else return { unreadable: `address ${JSON.stringify(a.slice(0, 64))}` };
    }
  }
  return { addresses: [...out] };
}

/** `namespace/name` of a slice (its identity in the index). */
export function sliceKey(slice: SliceLike): string {
  return `${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`;
}

/**
 * The index; see the module docstring. `keepRemovedMs` is how long a removal time still
 * matters (the proxy-sync allowance): older ones are forgotten, which the decision reads
 * the same (max(syncedSince, removedAt) is then the sync time or later).
 */
export class EndpointIndex implements ReuseEvidence {
  private readonly bySlice = new Map<string, string[]>();
  private readonly count = new Map<string, number>();
  private readonly removed = new Map<string, number>();
  private readonly unreadable = new Map<string, string>();
  private since: number | undefined;

  constructor(private readonly keepRemovedMs: number) {}

  /** @see ReuseEvidence.syncedSince: undefined while not synced or while a slice cannot be read. */
  syncedSince(): number | undefined {
    return this.unreadable.size > 0 ? undefined : this.since;
  }

  /** @see ReuseEvidence.listing */
  listing(ip: string): EndpointListing {
    if ((this.count.get(ip) ?? 0) > 0) return { listed: true };
    const at = this.removed.get(ip);
    return at === undefined ? { listed: false } : { listed: false, removedAt: at };
  }

  /** Why the view cannot be read now (a slice it cannot read), or undefined. */
  unreadableReason(): string | undefined {
    const [first] = this.unreadable;
    return first ? `EndpointSlice ${first[0]}: ${first[1]}` : undefined;
  }

  /** How many addresses some slice lists now, and how many slices are indexed. */
  size(): { addresses: number; slices: number } {
    return { addresses: this.count.size, slices: this.bySlice.size };
  }

  /** The watch ended or failed: not synced until {@link replaceAll} (what it knew is kept, to diff against). */
  lost(): void {
    this.since = undefined;
  }

  /**
   * A complete list at `now` (ms) replaces the view: addresses it no longer lists count as
   * removed at `now` (they went some time during the break: `now` is the latest it can
   * have been), and the view is synced since `now`.
   */
  replaceAll(slices: readonly SliceLike[], now: number): void {
    const r = this.relist();
    r.add(slices, now);
    r.finish(now);
  }

  /**
   * A complete list taken page by page (so no page's objects are kept): unsynced from
   * now; `add` each page's slices at the time it came (ms), then `finish` at the time the
   * last came: slices no page listed are dropped (their addresses removed at that time)
   * and the view is synced since then. A relist never finished leaves the view unsynced.
   */
  relist(): { add(slices: readonly SliceLike[], now: number): void; finish(now: number): void } {
    this.since = undefined;
    const seen = new Set<string>();
    return {
      add: (slices, now) => {
        for (const s of slices) {
          const k = sliceKey(s);
          seen.add(k);
          this.put(k, s, now);
        }
      },
      finish: (now) => {
        for (const k of [...this.bySlice.keys()]) if (!seen.has(k)) this.drop(k, now);
        for (const k of [...this.unreadable.keys()]) if (!seen.has(k)) this.unreadable.delete(k);
        this.since = now;
      },
    };
  }

  /** One watch event at `now` (ms): a slice added or modified, or deleted. */
  apply(type: 'ADDED' | 'MODIFIED' | 'DELETED', slice: SliceLike, now: number): void {
    const k = sliceKey(slice);
    if (type === 'DELETED') {
      this.drop(k, now);
      this.unreadable.delete(k);
    } else this.put(k, slice, now);
    this.prune(now);
  }

  private put(k: string, slice: SliceLike, now: number): void {
    const got = sliceAddresses(slice);
    if ('unreadable' in got) {
      // Keep what it listed before: an unreadable slice never unlists anything.
      this.unreadable.set(k, got.unreadable);
      return;
    }
    this.unreadable.delete(k);
    const before = this.bySlice.get(k) ?? [];
    for (const a of got.addresses) this.count.set(a, (this.count.get(a) ?? 0) + 1);
    this.bySlice.set(k, got.addresses);
    for (const a of before) this.decrement(a, now);
  }

  private drop(k: string, now: number): void {
    const before = this.bySlice.get(k);
    if (!before) return;
    this.bySlice.delete(k);
    for (const a of before) this.decrement(a, now);
  }

  private decrement(a: string, now: number): void {
    const n = (this.count.get(a) ?? 0) - 1;
    if (n > 0) return void this.count.set(a, n);
    this.count.delete(a);
    this.removed.set(a, now);
  }

  private prune(now: number): void {
    if (this.removed.size < 1024) return;
    for (const [a, at] of this.removed) if (now - at > this.keepRemovedMs) this.removed.delete(a);
  }
}
