/**
 * Releases surplus /28 prefixes (prefix delegation) for the shrink executor: a prefix
 * goes only whole, and only when none of its 16 addresses is assigned, cooling,
 * unverified or releasing (the datastore reserves it first, so no ADD can take one of
 * its addresses while the unassign is in flight). One UnassignPrivateIpAddresses with
 * `Ipv4Prefix.N` per ENI. Every release passes the {@link ReleaseGate}; a call whose
 * outcome is unknown (5xx, timeout) leaves the prefixes reserved until a describe of
 * the ENI settles them — no decision is made from a failed describe.
 */
import type { Ec2Api } from '../cloud/ec2.js';
import type { Datastore } from '../datastore/datastore.js';
import type { Logger } from '../log.js';
import { unassignRefusedKeepingAddresses } from './eni-ownership.js';
import type { ReleaseGate } from './release-gate.js';

/** Options of {@link PrefixReleaser}. */
export interface PrefixReleaserOptions {
  ds: Datastore;
  ec2: Ec2Api;
  gate: ReleaseGate;
  log: Logger;
  /** Clock (ms since epoch). */
  now: () => number;
}

/** Outcome of {@link PrefixReleaser.release}. */
export type PrefixReleaseResult =
  /** EC2 confirmed; the prefixes left the datastore (possibly none: nothing was free). */
  | { kind: 'released'; prefixes: string[] }
  /** Demand came back (or releases froze) before the call: the reservation was returned. */
  | { kind: 'cancelled'; why: string }
  /** The call failed; the shrink should stop for this pass. */
  | { kind: 'failed' };

/** Unassigns free /28 prefixes, one batch per ENI. */
export class PrefixReleaser {
  /** Prefixes whose unassign outcome is unknown, by ENI: kept `releasing` until EC2 says. */
  private readonly unsettled = new Map<string, Set<string>>();

  constructor(private readonly o: PrefixReleaserOptions) {}

  /** Prefixes held back because an unassign's outcome is not known yet. */
  unsettledPrefixes(): string[] {
    return [...this.unsettled.values()].flatMap((s) => [...s]);
  }

  /**
   * Reserves up to `count` free prefixes of `eniId`, then — unless releases are frozen or
   * `demand()` names a reason to stop — unassigns them in one call.
   * @param count /28 prefixes (≥ 0). @param demand returns why to cancel, or undefined.
   * Never throws: EC2 failures become `failed` (logged).
   */
  async release(eniId: string, count: number, demand: () => string | undefined): Promise<PrefixReleaseResult> {
    const { ds, ec2, gate, log } = this.o;
    if (count <= 0) return { kind: 'released', prefixes: [] };
    const prefixes = ds.reservePrefixesForRelease(eniId, count, this.o.now());
    if (prefixes.length === 0) return { kind: 'released', prefixes: [] };
    const why = gate.frozen ? 'releases frozen' : demand();
    if (why) {
      ds.cancelPrefixRelease(prefixes);
      return { kind: 'cancelled', why };
    }
    try {
      await ec2.unassignPrefixes(eniId, prefixes);
    } catch (e) {
      if (unassignRefusedKeepingAddresses(e)) {
        ds.cancelPrefixRelease(prefixes);
        log.warn({ eniId, prefixes, err: (e as Error).message }, 'prefix unassign failed; prefixes kept in the pool');
      } else {
        const set = this.unsettled.get(eniId) ?? new Set<string>();
        for (const p of prefixes) set.add(p);
        this.unsettled.set(eniId, set);
        log.warn({ eniId, prefixes, err: (e as Error).message }, 'prefix unassign outcome unknown; prefixes held back until EC2 says');
      }
      return { kind: 'failed' };
    }
    const kept = ds.removePrefixes(prefixes, this.o.now());
    if (kept.length) log.error({ eniId, kept }, 'unassigned prefixes still had addresses in use; kept in the datastore');
    log.info({ eniId, prefixes }, 'released surplus /28 prefixes');
    return { kind: 'released', prefixes: prefixes.filter((p) => !kept.includes(p)) };
  }

  /**
   * Asks EC2 about prefixes whose unassign outcome is unknown: still on the ENI → back to
   * the pool; gone → removed from the datastore. A failed describe decides nothing.
   */
  async settle(): Promise<void> {
    const { ds, ec2, log } = this.o;
    for (const [eniId, set] of [...this.unsettled]) {
      let eni;
      try {
        [eni] = await ec2.describeEnis([eniId]);
      } catch (e) {
        log.info({ eniId, err: (e as Error).message }, 'cannot settle an unknown prefix unassign yet');
        continue;
      }
      if (!eni) continue;
      const still = new Set(eni.ipv4Prefixes);
      const back = [...set].filter((p) => still.has(p));
      const gone = [...set].filter((p) => !still.has(p));
      ds.cancelPrefixRelease(back);
      ds.removePrefixes(gone, this.o.now());
      this.unsettled.delete(eniId);
      log.info({ eniId, back, gone }, 'settled a prefix unassign of unknown outcome');
    }
  }
}
