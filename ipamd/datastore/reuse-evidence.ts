/**
 * The cooldown that ends on evidence (issue 41, docs/design.md#cooldown-that-ends-on-evidence):
 * the pure decision whether an address unassigned by a DEL may be handed out again before
 * IP_COOLDOWN_PERIOD ends. Pure; every time is ms on the monotonic scale (docs/design.md#time).
 *
 * The cooldown exists so that kube-proxy (and other proxies) on every node have dropped an
 * address that was a Service endpoint before a new pod receives it. The cluster says which
 * addresses are endpoints: the EndpointSlices. An address may be reused early only when
 * (a) the slices, watched without a break since `syncedSince`, do not list it now, and
 * (b) a proxy-sync allowance has passed since the later of the watch's sync and the last
 * slice change seen removing it. Anything that cannot be read counts as "still listed":
 * no evidence view, a view not synced now, an allowance that is not a finite number ≥ 0.
 * The timer (IP_COOLDOWN_PERIOD) stays the upper bound and is applied by the caller.
 */

/** What the EndpointSlices say of one address. */
export type EndpointListing =
  /** A slice lists it now (any endpoint condition: a terminating endpoint still receives traffic). */
  | { listed: true }
  /** No slice lists it now; `removedAt` (ms) is the last change seen removing it, if one is still relevant. */
  | { listed: false; removedAt?: number };

/**
 * A read-only view of the EndpointSlices (the watch in ipamd/kube/endpoint-index.ts keeps
 * one). Both methods are synchronous memory reads.
 */
export interface ReuseEvidence {
  /**
   * Since when (ms) the view has been complete and current without a break: the time of
   * the list that last (re)started the watch. undefined while it is not (never listed,
   * the watch ended or failed, a slice with an address it cannot read): then nothing
   * ends a cooldown early.
   */
  syncedSince(): number | undefined;
  /** What the slices say of `ip` (a dotted quad). */
  listing(ip: string): EndpointListing;
}

/**
 * The earliest time (ms) at which the evidence lets `ip` be handed out again, or undefined
 * when it never does as things stand (no view, view not synced, address listed, bad
 * allowance): max(syncedSince, removedAt) + allowanceMs. The caller compares it with `now`
 * and with the timer; a time in the past means "now".
 * @param allowanceMs ENI_IPAM_PROXY_SYNC_ALLOWANCE (ms): how long every proxy may take to
 *        apply a slice change after the watch saw it (see docs/configuration.md for its default,
 *        drawn from kube-proxy's --iptables-min-sync-period).
 */
export function evidenceReuseAt(
  evidence: ReuseEvidence | undefined,
  ip: string,
  allowanceMs: number,
): number | undefined {
  if (!evidence || !Number.isFinite(allowanceMs) || allowanceMs < 0) return undefined;
  const since = evidence.syncedSince();
  if (since === undefined || !Number.isFinite(since)) return undefined;
  const l = evidence.listing(ip);
  if (l.listed !== false) return undefined;
  if (l.removedAt !== undefined && !Number.isFinite(l.removedAt)) return undefined;
  return Math.max(since, l.removedAt ?? since) + allowanceMs;
}

/** Why a cooled address may be handed out: its timer ran out, or the evidence ended it early. */
export type ReuseBy = 'timer' | 'evidence';

/**
 * Whether an address unassigned at `releasedAt` may be handed out at `now`, and why:
 * 'timer' once `now − releasedAt ≥ cooldownMs` (IP_COOLDOWN_PERIOD, the upper bound),
 * 'evidence' once {@link evidenceReuseAt} is ≤ `now` before that, else undefined (still
 * cooling). `cooldownMs` 0 keeps today's meaning: no cooldown at all.
 */
export function reuseAllowed(
  releasedAt: number,
  now: number,
  cooldownMs: number,
  evidenceAt: number | undefined,
): ReuseBy | undefined {
  if (now - releasedAt >= cooldownMs) return 'timer';
  if (evidenceAt !== undefined && evidenceAt <= now) return 'evidence';
  return undefined;
}
