/**
 * The containers ipamd served a DEL (or GC) for and assigned nothing to since
 * (docs/design.md#13-evidence-before-trust item 5): the evidence pass never adopts such a
 * sandbox, and the memory survives a restart in the checkpoint. Bounded to the newest
 * {@link RELEASED_CONTAINERS_KEPT}; insertion order is age (a re-release moves to newest).
 */

/** Container ids remembered as released, oldest forgotten first. */
export const RELEASED_CONTAINERS_KEPT = 4096;

/** A remembered DEL: container id and when (ms since epoch). */
export interface ReleasedEntry {
  containerID: string;
  releasedAt: number;
}

/** The remembered DELs; `onChange(id)` is told of every id remembered or forgotten (the datastore's change log). */
export class ReleasedContainers {
  /** Container id → released at (ms); insertion order = age. */
  private readonly byId = new Map<string, number>();
  /** {@link entries}' last answer, kept while the map is unchanged. */
  private cache?: ReadonlyArray<Readonly<ReleasedEntry>>;

  constructor(private readonly onChange: (containerID: string) => void) {}

  /**
   * True if `containerID` is remembered: an attachment of it was unassigned (CNI DEL or
   * GC) and none was assigned or restored for it since. The evidence pass never adopts
   * such a sandbox: a runtime still listing it READY with its IP is a snapshot from
   * before the DEL, or a StopPodSandbox in progress (CNI DEL comes first).
   */
  has(containerID: string): boolean {
    return this.byId.has(containerID);
  }

  /** When `containerID` was released (ms), or undefined. */
  get(containerID: string): number | undefined {
    return this.byId.get(containerID);
  }

  /** How many are remembered. */
  get size(): number {
    return this.byId.size;
  }

  /** Remembers `containerID` as released at `at` (ms), newest last, forgetting the oldest beyond the cap. */
  remember(containerID: string, at: number): void {
    this.cache = undefined;
    this.byId.delete(containerID);
    this.byId.set(containerID, at);
    this.onChange(containerID);
    if (this.byId.size > RELEASED_CONTAINERS_KEPT) this.forget(this.byId.keys().next().value!);
  }

  /** Forgets `containerID`, if remembered. */
  forget(containerID: string): void {
    if (!this.byId.delete(containerID)) return;
    this.cache = undefined;
    this.onChange(containerID);
  }

  /**
   * All remembered, oldest first (frozen). The same array is returned until the set
   * changes, so a caller can tell "unchanged" by identity.
   */
  entries(): ReadonlyArray<Readonly<ReleasedEntry>> {
    this.cache ??= Object.freeze(
      [...this.byId].map(([containerID, releasedAt]) => Object.freeze({ containerID, releasedAt })),
    );
    return this.cache;
  }

  /**
   * Restores remembered containers from this boot's checkpoint (before its allocations:
   * an allocation restored for the same container wins, as an assignment after the DEL
   * would). Order is by `releasedAt`; beyond {@link RELEASED_CONTAINERS_KEPT} the oldest
   * are forgotten. Entries already known keep the newer time.
   */
  restore(entries: ReadonlyArray<ReleasedEntry>): void {
    const all = [...entries, ...this.entries()].sort((a, b) => a.releasedAt - b.releasedAt);
    for (const e of all) this.remember(e.containerID, Math.max(e.releasedAt, this.get(e.containerID) ?? 0));
  }

  /**
   * Forgets containers a successful runtime read no longer lists (`listed`: the READY
   * sandbox ids it returned) that were released at or before `releasedBefore` (ms; the
   * caller passes now − GC grace, so a read started before the DEL cannot expire one).
   * @returns how many were forgotten.
   */
  expire(listed: ReadonlySet<string>, releasedBefore: number): number {
    return this.forgetWhere((id, at) => !listed.has(id) && at <= releasedBefore);
  }

  /** Forgets every entry for which `drop(id, releasedAt)` is true; returns how many. */
  forgetWhere(drop: (containerID: string, releasedAt: number) => boolean): number {
    let n = 0;
    for (const [id, at] of this.byId) {
      if (drop(id, at)) {
        this.forget(id);
        n++;
      }
    }
    return n;
  }
}
