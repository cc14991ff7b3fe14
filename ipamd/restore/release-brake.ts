/**
 * The release brake (docs/design.md#4-restore-after-restart rule 5), pure: one evidence pass never releases more
 * than {@link brakeLimit} allocations on the word of a single source. An allocation
 * counts as **confirmed gone** when at least two independent sources agree: the runtime
 * (read, plausible, does not list it), Kubernetes (synced, plausible, does not list it),
 * and the kernel (read, shows no pod wiring for its IP, and shows at least one pod veth
 * at all — a view with no pod veth might be the wrong namespace, so its silence is not
 * counted). Above the limit the pass releases **nothing** (not even the confirmed ones:
 * a pass that wants that much is itself the anomaly) and says why.
 */

/** Allocations one pass may release on a single source's word: max(2, ⌊10 % of held⌋). */
export function brakeLimit(held: number): number {
  return Math.max(2, Math.floor(held / 10));
}

/** Votes that an allocation is gone, by source. */
export interface GoneVotes {
  cri: boolean;
  kube: boolean;
  kernel: boolean;
}

/** True when at least two independent sources agree the allocation is gone. */
export function confirmedGone(v: GoneVotes): boolean {
  return Number(v.cri) + Number(v.kube) + Number(v.kernel) >= 2;
}

/** The brake's verdict for one pass. */
export interface BrakeVerdict {
  /** True when the pass must release nothing. */
  held: boolean;
  /** Release candidates only one source says are gone. */
  single: number;
  /** Release candidates two or more sources agree are gone. */
  confirmed: number;
  limit: number;
  /** Operator-facing reason when held. */
  reason?: string;
}

/** Applies the brake to a pass's candidates (`held` = allocations the datastore holds). */
export function applyBrake(p: { held: number; single: number; confirmed: number; sources: string }): BrakeVerdict {
  const limit = brakeLimit(p.held);
  if (p.single <= limit) return { held: false, single: p.single, confirmed: p.confirmed, limit };
  return {
    held: true,
    single: p.single,
    confirmed: p.confirmed,
    limit,
    reason: `release brake: this pass would release ${p.single + p.confirmed} of ${p.held} allocations, ${p.single} of them on the word of ${p.sources} alone (at most ${limit} allowed per pass without a second source agreeing); released nothing`,
  };
}
