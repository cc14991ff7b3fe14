/**
 * Stamps of a checkpoint across a restart (docs/design.md#time), pure. Each ipamd process
 * measures time on its own monotonic scale (clock.ts `monoNow`: the wall clock at its start,
 * then CLOCK_MONOTONIC), so the stamps a previous process wrote (cooldown `releasedAt`,
 * `allocatedAt`, remembered DELs) are on its scale, not ours: a wall-clock step while ipamd
 * was down separates the two. A checkpoint that records its writer's `monoAtBoot`
 * (clock.ts) and this boot's id converts exactly: a stamp minus the writer's `monoAtBoot`
 * is ms since boot, plus ours is our scale. Without it (a file of an ipamd before this, or
 * aws-node's), stamps are taken as they are and clamped to now, as before: a forward step
 * while down may shorten what is left of a cooldown. From another boot, nothing of the
 * previous boot's time is known: a cooldown restored from it lasts a full period.
 */

/** How stamps of a checkpoint map onto this process's scale. */
export type StampScale =
  /** Same boot, writer's `monoAtBoot` known: add `shift` (ms) to every stamp. */
  | { kind: 'exact'; shift: number }
  /** Same boot, no `monoAtBoot` (an older file): stamps as they are, clamped to now. */
  | { kind: 'legacy' }
  /** Another boot: stamps mean nothing here. */
  | { kind: 'other-boot' };

/**
 * The scale of a checkpoint written on boot `saved.bootId` by a process with `saved.monoAtBoot`,
 * read on boot `bootId` by a process with `monoAtBoot` (ms, clock.ts).
 */
export function stampScale(
  saved: { bootId: string; monoAtBoot?: number | undefined },
  bootId: string,
  monoAtBoot: number,
): StampScale {
  if (saved.bootId !== bootId) return { kind: 'other-boot' };
  if (saved.monoAtBoot === undefined || !Number.isFinite(saved.monoAtBoot)) return { kind: 'legacy' };
  return { kind: 'exact', shift: monoAtBoot - saved.monoAtBoot };
}

/**
 * `stamp` (ms, the writer's scale) on this process's scale at `now` (ms): shifted when the
 * scale is exact, never after `now` (a stamp from the future counts as now), and `now`
 * itself from another boot (a cooldown restored from it starts afresh: a full period).
 */
export function rebaseStamp(stamp: number, scale: StampScale, now: number): number {
  if (scale.kind === 'other-boot') return now;
  return Math.min(scale.kind === 'exact' ? stamp + scale.shift : stamp, now);
}
