/**
 * The release gate: the single switch every path that would give an address back to
 * EC2 (UnassignPrivateIpAddresses, DetachNetworkInterface, DeleteNetworkInterface)
 * must pass. Releases are **frozen** while any reason is held (docs/design.md#4-restore-after-restart rule 3): a
 * source that could not be read never turns into "free".
 *
 * Sources that hold it: `startup` (first evidence pass not done), `checkpoint` (missing
 * or corrupt while the ENIs hold IPs), `cri`, `kube`, `kernel` (unreadable, or suspect:
 * answered implausibly; restore/plausibility.ts), `brake` (the last evidence pass wanted
 * to release more than max(2, 10 %) on one source's word and released nothing;
 * restore/release-brake.ts). While any is held the shrink (shrink-executor.ts), prefix
 * release, ENI freeing (eni-free.ts) and the leaked-ENI sweep do nothing, so no address
 * a held pass kept is ever unassigned, detached or deleted.
 */
export class ReleaseGate {
  private readonly reasons = new Map<string, string>();
  private readonly listeners = new Set<(frozen: boolean, reasons: string[]) => void>();

  /** Freezes releases for `source` (e.g. "checkpoint", "cri") with an operator-facing reason. */
  freeze(source: string, reason: string): void {
    const was = this.frozen;
    this.reasons.set(source, reason);
    if (!was) this.emit();
  }

  /** Lifts the freeze held by `source`; releases resume when no reason is left. */
  lift(source: string): void {
    if (!this.reasons.delete(source)) return;
    if (!this.frozen) this.emit();
  }

  /** True while at least one source holds a freeze. */
  get frozen(): boolean {
    return this.reasons.size > 0;
  }

  /** True while `source` holds a freeze. */
  holds(source: string): boolean {
    return this.reasons.has(source);
  }

  /** Current reasons, as `"<source>: <reason>"`. */
  describe(): string[] {
    return [...this.reasons].map(([s, r]) => `${s}: ${r}`);
  }

  /** Calls `fn` whenever the gate flips between frozen and open. */
  onChange(fn: (frozen: boolean, reasons: string[]) => void): void {
    this.listeners.add(fn);
  }

  private emit(): void {
    for (const fn of this.listeners) fn(this.frozen, this.describe());
  }
}
