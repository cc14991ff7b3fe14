/**
 * Records of the datastore, internal to ipamd/datastore/: one per address and one per
 * ENI, and the address-state function; and {@link keyString}, the one export its
 * consumers use. Pure; no I/O.
 *
 * Address states:
 * - available: on an ENI, held by nobody, not cooling, not being released;
 * - assigned:  held by exactly one allocation key;
 * - cooling:   released less than `cooldownMs` ago (IP_COOLDOWN_PERIOD) — neither
 *              available nor assigned, so a just-freed IP is not reused at once;
 * - releasing: reserved by the pool controller for an EC2 unassign (or an ENI detach),
 *              so an ADD can never be handed an address that is being released. A
 *              release is first `reserved`, then `sent` right before the EC2 call
 *              (`markReleaseSent`); see `Datastore.restoreAllocation` for what an
 *              adoption does to each phase, and `Datastore.completeRelease`;
 * - unverified: found on an ENI at start with no checkpoint to say who holds it; a live
 *              pod may be using it, so it is neither handed out nor released until a
 *              clean read of the runtime says (docs/design.md#4-restore-after-restart). A *quarantined* address (an
 *              ADD found the node routing it to another pod: `Datastore.quarantine`)
 *              is in this state too, until `Datastore.liftQuarantine`.
 */
import type { AllocationKey, EniInfo, IpState } from './types.js';

/** Canonical string of an allocation key (NUL-separated, so no field can forge another). */
export function keyString(k: AllocationKey): string {
  return `${k.networkName}\u0000${k.containerID}\u0000${k.ifName}`;
}

/**
 * Where a release of an address stands: `reserved` by a releaser that has not called
 * EC2 yet (an adoption may still cancel it), or `sent` (the EC2 call was made or is
 * about to be: only EC2's answer can settle it). See `Datastore.restoreAllocation`.
 */
export type ReleasePhase = 'reserved' | 'sent';

/** One address the node holds: a secondary IP, or one of the 16 addresses of a /28 prefix. */
export interface IpRecord {
  ip: string;
  eniId: string;
  /** The /28 prefix (`a.b.c.d/28`) the address belongs to; undefined for a secondary IP. */
  prefix?: string;
  /** Allocation key string while assigned. */
  holder?: string;
  /** When it was last released (ms), for cooldown and least-recently-used reuse. */
  releasedAt?: number;
  /** Release in progress (false: none). An address can be held *and* `sent` (adopted mid-flight). */
  releasing: false | ReleasePhase;
  unverified?: boolean;
  /**
   * Quarantined (docs/design.md#13-evidence-before-trust item 4): an ADD found the node already routing this address to
   * another pod's veth. Counts as `unverified` (never handed out, never released) until
   * the conflict is gone (`Datastore.liftQuarantine`).
   */
  quarantined?: { since: number; reason: string };
}

/** One ENI with its addresses and its /28 prefixes (prefix → its 16 addresses, in order). */
export interface EniRecord {
  info: EniInfo;
  ips: Map<string, IpRecord>;
  prefixes: Map<string, string[]>;
}

/**
 * State of an address at `now` (ms): assigned > unverified (or quarantined) > releasing >
 * cooling (released less than `cooldownMs` ago) > available.
 */
export function ipStateOf(r: IpRecord, now: number, cooldownMs: number): IpState {
  if (r.holder !== undefined) return 'assigned';
  if (r.unverified || r.quarantined) return 'unverified';
  if (r.releasing) return 'releasing';
  if (r.releasedAt !== undefined && now - r.releasedAt < cooldownMs) return 'cooling';
  return 'available';
}
