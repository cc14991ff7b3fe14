/**
 * Releases surplus /28 prefixes (prefix delegation) for the shrink executor: a prefix
 * goes only whole, and only when none of its 16 addresses is assigned, cooling,
 * unverified or releasing (the datastore reserves it first, so no ADD can take one of
 * its addresses while the unassign is in flight). One UnassignPrivateIpAddresses with
 * `Ipv4Prefix.N` per ENI. Every release passes the {@link ReleaseGate}; the steps from
 * reservation to EC2's answer (an adoption mid-way, an outcome unknown until a describe
 * settles it) are those of release-batch.ts.
 */
import type { Ec2Port } from '../../cloud/ec2-port.js';
import type { ReleasePhases } from '../../datastore/roles.js';
import type { Allocation } from '../../datastore/types.js';
import type { Logger } from '../../log.js';
import { decideSend, sendRelease, UnsettledReleases, type ReleaseOps } from './release-batch.js';
import type { ReleaseGate } from './release-gate.js';

/** Options of {@link PrefixReleaser}. */
export interface PrefixReleaserOptions {
  ds: ReleasePhases;
  ec2: Ec2Port;
  gate: ReleaseGate;
  log: Logger;
  /** Clock (ms since epoch). */
  now: () => number;
}

/** Outcome of {@link PrefixReleaser.release}. */
export type PrefixReleaseResult =
  /**
   * EC2 confirmed; the prefixes left the datastore (possibly none: nothing was free).
   * `lost`: allocations adopted onto one of their addresses while the call was in flight (now pending).
   */
  | { kind: 'released'; prefixes: string[]; lost: Allocation[] }
  /** Demand came back (or releases froze) before the call: the reservation was returned. */
  | { kind: 'cancelled'; why: string }
  /** The call failed; the shrink should stop for this pass. */
  | { kind: 'failed' };

/** Unassigns free /28 prefixes, one batch per ENI. */
export class PrefixReleaser {
  private readonly ops: ReleaseOps;
  /** Prefixes whose unassign outcome is unknown, by ENI: kept `releasing` until EC2 says. */
  private readonly unsettled: UnsettledReleases;

  constructor(private readonly o: PrefixReleaserOptions) {
    const { ds } = o;
    this.ops = {
      what: '/28 prefixes',
      cancel: (p) => ds.cancelPrefixRelease(p),
      markSent: (p) => ds.markPrefixReleaseSent(p),
      complete: (p) => ds.completePrefixRelease(p),
      onEni: (eni) => eni.ipv4Prefixes,
    };
    this.unsettled = new UnsettledReleases({ ec2: o.ec2, log: o.log, ops: this.ops });
  }

  /** Prefixes held back because an unassign's outcome is not known yet. */
  unsettledPrefixes(): string[] {
    return this.unsettled.list();
  }

  /**
   * Reserves up to `count` free prefixes of `eniId`, then — unless releases are frozen or
   * `demand()` names a reason to stop — unassigns them in one call.
   * @param count /28 prefixes (≥ 0). @param demand returns why to cancel, or undefined.
   * Never throws: EC2 failures become `failed` (logged).
   */
  async release(eniId: string, count: number, demand: () => string | undefined): Promise<PrefixReleaseResult> {
    const { ds, ec2, gate, log } = this.o;
    const none: PrefixReleaseResult = { kind: 'released', prefixes: [], lost: [] };
    if (count <= 0) return none;
    const reserved = ds.reservePrefixesForRelease(eniId, count, this.o.now());
    if (reserved.length === 0) return none;
    const d = decideSend(reserved, this.ops, gate, demand);
    if (d.kind !== 'send') return d.kind === 'nothing' ? none : d;
    const r = await sendRelease({
      eniId,
      items: d.items,
      call: () => ec2.unassignPrefixes(eniId, d.items),
      ops: this.ops,
      unsettled: this.unsettled,
      log,
    });
    if (!r.ok) return { kind: 'failed' };
    log.info({ eniId, prefixes: d.items }, 'released surplus /28 prefixes');
    return { kind: 'released', prefixes: d.items, lost: r.lost };
  }

  /**
   * Asks EC2 about prefixes whose unassign outcome is unknown: still on the ENI → back to
   * the pool; gone → removed from the datastore. A failed describe decides nothing.
   * @returns allocations made pending (see {@link PrefixReleaseResult}).
   */
  settle(): Promise<Allocation[]> {
    return this.unsettled.settle();
  }
}
