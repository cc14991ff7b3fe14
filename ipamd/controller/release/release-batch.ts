/**
 * What every batched release of addresses shares — UnassignPrivateIpAddresses of
 * secondary IPs (shrink-executor.ts) or of whole /28 prefixes (prefix-release.ts) —
 * from the reservation in the datastore to EC2's answer:
 *
 * 1. {@link decideSend}: the last check, synchronous, right before the EC2 call. If
 *    releases froze or demand came back, the reservation is returned; otherwise the
 *    items still reserved are marked `sent` (an item an adoption took meanwhile is left
 *    out, so a live pod's IP is never sent).
 * 2. {@link sendRelease}: the call, then EC2 is the truth. Success → the items leave the
 *    datastore; an allocation adopted onto one while the call was in flight becomes
 *    `pending` (kept, flagged, ADD refused) and is logged as an error. A failure for
 *    sure (4xx, throttled) → the items return to the pool (an adopted one is then plainly
 *    assigned). Unknown outcome (5xx, timeout) → {@link UnsettledReleases}.
 * 3. {@link UnsettledReleases.settle}: a describe of the ENI decides the unknown ones; a
 *    failed describe decides nothing (docs/design.md#8-lessons-the-field-paid-for).
 */
import type { Ec2Port, Ec2Eni } from '../../cloud/ec2-port.js';
import type { Allocation } from '../../datastore/types.js';
import type { Logger } from '../../log.js';
import { unassignRefusedKeepingAddresses } from '../../cloud/ec2-outcome.js';
import type { ReleaseGate } from './release-gate.js';

/** How one kind of release (items = IPs, or /28 prefixes) reads and changes the datastore. */
export interface ReleaseOps {
  /** Noun for logs: "IPs" or "prefixes". */
  what: string;
  /** Returns reserved items to the pool (`Datastore.cancelRelease` / `cancelPrefixRelease`). */
  cancel(items: readonly string[]): void;
  /** Marks reserved items sent; returns those still reserved (`Datastore.markReleaseSent` / `markPrefixReleaseSent`). */
  markSent(items: readonly string[]): string[];
  /** EC2 confirmed the items gone; returns the allocations made pending (`Datastore.completeRelease` / `completePrefixRelease`). */
  complete(items: readonly string[]): Allocation[];
  /** The items of this kind EC2 shows on a described ENI. */
  onEni(eni: Ec2Eni): string[];
}

/** Outcome of {@link decideSend}. */
export type SendDecision =
  | { kind: 'send'; items: string[] }
  /** Nothing reserved is left to send (every item was taken by an adoption). */
  | { kind: 'nothing' }
  | { kind: 'cancelled'; why: string };

/**
 * The last check before a release becomes irrevocable; call it with no `await` between
 * it and the EC2 call. Frozen releases or a reason from `demand()` return the whole
 * reservation (`cancelled`); otherwise the items still reserved are marked sent.
 */
export function decideSend(
  items: readonly string[],
  ops: ReleaseOps,
  gate: ReleaseGate,
  demand: () => string | undefined,
): SendDecision {
  const why = gate.frozen ? 'releases frozen' : demand();
  if (why) {
    ops.cancel(items);
    return { kind: 'cancelled', why };
  }
  const sent = ops.markSent(items);
  return sent.length ? { kind: 'send', items: sent } : { kind: 'nothing' };
}

/** Releases whose EC2 outcome is unknown, by ENI: kept `releasing` until a describe settles them. */
export class UnsettledReleases {
  private readonly byEni = new Map<string, Set<string>>();

  constructor(private readonly o: { ec2: Ec2Port; log: Logger; ops: ReleaseOps }) {}

  /** Items held back, all ENIs. */
  list(): string[] {
    return [...this.byEni.values()].flatMap((s) => [...s]);
  }

  /** Adds items of `eniId` whose unassign outcome is unknown. */
  add(eniId: string, items: readonly string[]): void {
    const set = this.byEni.get(eniId) ?? new Set<string>();
    for (const x of items) set.add(x);
    this.byEni.set(eniId, set);
  }

  /**
   * Describes each ENI with unsettled items: those still on it return to the pool, the
   * others leave the datastore. A failed describe decides nothing. Never throws.
   * @returns allocations made pending (adopted onto an item EC2 took).
   */
  async settle(): Promise<Allocation[]> {
    const { ec2, log, ops } = this.o;
    const lost: Allocation[] = [];
    for (const [eniId, set] of [...this.byEni]) {
      let eni: Ec2Eni | undefined;
      try {
        [eni] = await ec2.describeEnis([eniId]);
      } catch (e) {
        log.info(
          { eniId, err: (e as Error).message },
          `cannot settle an unassign of ${ops.what} of unknown outcome yet`,
        );
        continue;
      }
      if (!eni) continue;
      const still = new Set(ops.onEni(eni));
      const back = [...set].filter((x) => still.has(x));
      const gone = [...set].filter((x) => !still.has(x));
      ops.cancel(back);
      lost.push(...reportLost(ops.complete(gone), eniId, log));
      this.byEni.delete(eniId);
      log.info({ eniId, back, gone }, `settled an unassign of ${ops.what} of unknown outcome`);
    }
    return lost;
  }
}

/** Outcome of {@link sendRelease}. */
export type SendResult = { ok: true; lost: Allocation[] } | { ok: false };

/**
 * Makes the EC2 call (`call`) for items {@link decideSend} marked sent and applies the
 * answer (see the module docstring). Never throws.
 */
export async function sendRelease(p: {
  eniId: string;
  items: string[];
  call: () => Promise<void>;
  ops: ReleaseOps;
  unsettled: UnsettledReleases;
  log: Logger;
}): Promise<SendResult> {
  const { eniId, items, ops, log } = p;
  try {
    await p.call();
  } catch (e) {
    // A clear 4xx that leaves the addresses on the ENI returns them to the pool; anything
    // else (5xx, timeout, or InvalidParameterValue: "not on this ENI", i.e. maybe already
    // unassigned by an earlier attempt) is settled by a describe.
    if (unassignRefusedKeepingAddresses(e)) {
      ops.cancel(items);
      log.warn({ eniId, items, err: (e as Error).message }, `unassign of ${ops.what} failed; kept in the pool`);
    } else {
      p.unsettled.add(eniId, items);
      log.warn(
        { eniId, items, err: (e as Error).message },
        `unassign of ${ops.what} of unknown outcome; held back until EC2 says`,
      );
    }
    return { ok: false };
  }
  return { ok: true, lost: reportLost(ops.complete(items), eniId, log) };
}

/** Logs allocations EC2 took the address of (see {@link sendRelease}) as errors; returns them. */
function reportLost(lost: Allocation[], eniId: string, log: Logger): Allocation[] {
  for (const a of lost) {
    log.error(
      { eniId, ip: a.ipv4, containerID: a.containerID, pod: a.pod },
      'EC2 unassigned an IP that a sandbox was found using while the unassign was in flight: its allocation is kept but pending (no ENI has the IP; ADD refused); the pod needs a restart',
    );
  }
  return lost;
}
