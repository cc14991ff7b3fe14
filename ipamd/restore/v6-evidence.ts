/**
 * The restore evidence for the IPv6 allocations of an `ipv6`/`dual` node
 * (docs/design.md#ip-families, #4-restore-after-restart), with the IPv4 merge's own rules:
 * the same {@link mergeEvidence} decides, over the IPv6 allocations shown to it as
 * allocations whose address is the /128 (`ipv4` holds the IPv6 text). The runtime knows a
 * key by its container id or the sandbox's IP, Kubernetes by the pod's IP or uid, the kernel
 * by a `/128` host route to a pod veth or, in `ipv6` mode, the `/32` route of the pod's
 * egress address (`v4if0`); the plausibility, the freezes and the release brake are the
 * merge's. The /128s quarantined "owner unknown" (the IPv6 checkpoint was lost while pods
 * ran: service/v6-adopt.ts) count as the merge's unverified IPs: a runtime that knows none
 * of the wired ones is suspect (releases freeze), and a READY sandbox with one is adopted:
 * with a runtime not suspect, the /128 (and in `ipv6` mode the egress IPv4 routed to that
 * container's egress veth) becomes its allocation again ({@link settleUnowned}), so its DEL
 * frees them; one the kernel no longer shows wired is freed when releases are allowed. In
 * `dual` mode (the runtime reports a sandbox's IPv4) they stay quarantined and are not
 * judged. Any other sandbox the checkpoint lacks is "foreign" here.
 *
 * In `dual` mode a key is released only when both merges release its halves (a key
 * holding one half only: that merge alone), and then both halves go together.
 */
import ipaddr from 'ipaddr.js';
import { egressVethNames } from '../../cni-plugin/facade.js';
import type { V6Allocation } from '../datastore/ipv6-allocations.js';
import { v6KeyOf } from '../datastore/ipv6-allocations.js';
import type { Allocation, AllocationKey } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { mergeEvidence, type KernelRead, type MergeInput, type MergeResult } from './merge.js';

/** The IPv6 allocations as the evidence pass sees them (datastore/ipv6-allocations.ts). */
export interface V6EvidenceTarget {
  allocations(): V6Allocation[];
  /** Releases the key's addresses into cooldown; undefined when it held none. */
  unassign(key: AllocationKey, now: number): V6Allocation | undefined;
  /** Addresses quarantined with their owner unknown (datastore/ipv6-allocations.ts). */
  unowned(): string[];
  /** Makes an unowned /128 (and egress IPv4) the allocation `a`; false when it cannot. */
  claim(a: V6Allocation): boolean;
  /** Frees unowned addresses no pod is wired to into cooldown; returns how many. */
  freeUnowned(addresses: Iterable<string>, now: number): number;
}

/** The IPv6 side of the evidence pass: its allocations, their durable write, the mode. */
export interface V6Evidence {
  v6: V6EvidenceTarget;
  /** Makes the IPv6 allocations durable (the IPv6 checkpoint). */
  persist: () => Promise<void>;
  /** `dual`: each key also holds an IPv4 half in the IPv4 datastore. */
  dual: boolean;
  /** The host veths' name prefix (AWS_VPC_K8S_CNI_VETHPREFIX), to find an adopted pod's egress veth. */
  vethPrefix: string;
}

/** `a` shown to the merge: its /128 in `ipv4`, no ENI. */
function asAllocation(a: V6Allocation): Allocation {
  return {
    networkName: a.networkName,
    containerID: a.containerID,
    ifName: a.ifName,
    ipv4: a.ipv6,
    eniId: '',
    allocatedAt: a.allocatedAt,
    ...(a.pod ? { pod: a.pod } : {}),
  };
}

/**
 * The kernel's read as the IPv6 merge sees it: an allocation is wired when its /128 or its
 * egress IPv4 is; an unowned /128 when it is.
 */
function kernelForV6(k: KernelRead, allocs: V6Allocation[], unowned: string[]): KernelRead {
  if (!k.ok) return k;
  const wired = allocs.filter((a) => k.podIps.has(a.ipv6) || (!!a.egressV4 && k.podIps.has(a.egressV4)));
  const podIps = new Set([...wired.map((a) => a.ipv6), ...unowned.filter((ip) => k.podIps.has(ip))]);
  return { ok: true, podIps, podVeths: k.podVeths };
}

/** `ip` in canonical IPv6 text, or as it is when it is not IPv6. */
const canon6 = (ip: string): string => (ipaddr.IPv6.isValid(ip) ? ipaddr.IPv6.parse(ip).toString() : ip);

/** The unowned addresses the evidence judges: none in `dual` mode (see the module docstring). */
const unownedOf = (e: V6Evidence): string[] => (e.dual ? [] : e.v6.unowned());

/**
 * The merge over the IPv6 allocations of `e`, from the IPv4 merge's input `base` (the
 * same reads, clock, grace and identities), with the unowned quarantined /128s as
 * unverified IPs a sandbox can be adopted on. Pure.
 */
export function mergeV6Evidence(base: MergeInput, e: V6Evidence): MergeResult {
  const allocs = e.v6.allocations();
  const unowned6 = unownedOf(e).filter((ip) => ip.includes(':'));
  const ours = new Set(unowned6);
  const byIp = new Map(allocs.map((a) => [a.ipv6, a]));
  return mergeEvidence({
    ...base,
    allocations: allocs.map(asAllocation),
    kernel: kernelForV6(base.kernel, allocs, unowned6),
    unverifiedIps: unowned6,
    isOurIp: (ip) => ours.has(canon6(ip)),
    holderOf: (ip) => {
      const a = byIp.get(canon6(ip));
      return a && asAllocation(a);
    },
  });
}

/**
 * Settles the unowned addresses after a pass (nothing while the kernel is unread, nothing in
 * `dual` mode). Claims the merge's adoptions `m6.adopt` (a READY sandbox on an unowned
 * /128) as allocations unless the runtime is suspect, with the unowned egress IPv4 the
 * kernel routes to the container's egress veth (`kernel.devOf`; none found → the /128
 * alone, the egress address stays quarantined). Then, when `canRelease` (every source read
 * and trusted), frees into cooldown the unowned addresses the kernel no longer shows wired
 * (their pod is gone). Logs each.
 * @returns how many were claimed and freed (the caller makes them durable).
 */
export function settleUnowned(
  e: V6Evidence,
  m6: MergeResult,
  canRelease: boolean,
  kernel: KernelRead,
  now: number,
  log: Logger,
): { claimed: number; freed: number } {
  if (!kernel.ok || e.dual) return { claimed: 0, freed: 0 };
  const claimed = m6.suspect.cri ? 0 : claimSandboxes(e, m6, kernel.devOf ?? new Map(), log);
  const gone = canRelease ? e.v6.unowned().filter((ip) => !kernel.podIps.has(ip)) : [];
  const freed = e.v6.freeUnowned(gone, now);
  if (freed > 0)
    log.info(
      { addresses: gone.slice(0, 20), freed },
      'IPv6: quarantined addresses no pod is wired to any more freed into cooldown (every source read and trusted)',
    );
  return { claimed, freed };
}

/** The claims of {@link settleUnowned}; `devOf` maps a pod address to its route's host veth. */
function claimSandboxes(
  e: V6Evidence,
  m6: MergeResult,
  devOf: ReadonlyMap<string, { dev: string }>,
  log: Logger,
): number {
  const unownedV4 = new Set(e.v6.unowned().filter((ip) => !ip.includes(':')));
  let n = 0;
  for (const a of m6.adopt) {
    // Its egress veth under any name it may have (one wired by an earlier eni-ipam keeps the older name).
    const veths = new Set(egressVethNames(e.vethPrefix, a.containerID, a.ifName));
    const egressV4 = [...unownedV4].find((ip) => veths.has(devOf.get(ip)?.dev ?? '')) ?? '';
    const ipv6 = canon6(a.ipv4);
    const ok = e.v6.claim({
      networkName: a.networkName,
      containerID: a.containerID,
      ifName: a.ifName,
      ipv6,
      egressV4,
      allocatedAt: a.allocatedAt,
      ...(a.pod ? { pod: a.pod } : {}),
    });
    if (ok) n++;
    log.info(
      { containerID: a.containerID, ipv6, egressV4: egressV4 || null, pod: a.pod, claimed: ok },
      ok
        ? 'IPv6: a quarantined wired /128 is adopted by the sandbox the runtime shows holding it'
        : 'IPv6: a sandbox holds a quarantined /128 that could not be adopted; it stays quarantined',
    );
  }
  return n;
}

/**
 * The pass's combined verdict over the IPv4 merge `m4` and the IPv6 merge `m6`: releases
 * allowed only when both allow them; a source suspect in either is suspect; the brake
 * held by either holds. Pure.
 */
export function combineMerges(m4: MergeResult, m6: MergeResult): MergeResult {
  const held = m4.brake?.held ? m4.brake : m6.brake?.held ? m6.brake : (m4.brake ?? m6.brake);
  const suspect = {
    ...(m4.suspect.cri || m6.suspect.cri ? { cri: [m4.suspect.cri, m6.suspect.cri].filter(Boolean).join('; ') } : {}),
    ...(m4.suspect.kube || m6.suspect.kube
      ? { kube: [m4.suspect.kube, m6.suspect.kube].filter(Boolean).join('; ') }
      : {}),
  };
  return {
    ...m4,
    live: [...m4.live, ...m6.live],
    kernelVouched: [...m4.kernelVouched, ...m6.kernelVouched],
    canRelease: m4.canRelease && m6.canRelease,
    suspect,
    ...(held ? { brake: held } : {}),
    identityTrusted: m4.identityTrusted && !m6.suspect.cri,
  };
}

/**
 * Which halves to unassign, given what each merge would release: `ipv6` mode (`dual`
 * false) the IPv6 merge's; `dual` a key whose held halves are all released by their
 * merges, both halves (a key holding only one half: that half). Pure.
 * @param v4Held keys (v6KeyOf) holding an IPv4 half; @param v6Held keys holding an IPv6 half.
 */
export function pairReleases(
  dual: boolean,
  release4: Allocation[],
  release6: Allocation[],
  v4Held: ReadonlySet<string>,
  v6Held: ReadonlySet<string>,
): { v4: Allocation[]; v6: AllocationKey[] } {
  if (!dual) return { v4: release4, v6: release6 };
  const r4 = new Set(release4.map(v6KeyOf));
  const r6 = new Set(release6.map(v6KeyOf));
  const ok = (k: string) => (!v4Held.has(k) || r4.has(k)) && (!v6Held.has(k) || r6.has(k));
  return { v4: release4.filter((a) => ok(v6KeyOf(a))), v6: release6.filter((a) => ok(v6KeyOf(a))) };
}

/**
 * Unassigns (into cooldown) the IPv6 halves the merges release ({@link pairReleases}), logging
 * each; the caller unassigns the returned IPv4 halves and makes both durable.
 * @param held4 the IPv4 datastore's allocations. @returns the IPv4 halves to unassign and how many IPv6 halves went.
 */
export function releaseV6Unvouched(
  e: V6Evidence,
  held4: Allocation[],
  m4: MergeResult,
  m6: MergeResult,
  now: number,
  log: Logger,
): { v4: Allocation[]; v6: number } {
  const v6Held = new Set(e.v6.allocations().map(v6KeyOf));
  const { v4, v6 } = pairReleases(e.dual, m4.release, m6.release, new Set(held4.map(v6KeyOf)), v6Held);
  let n = 0;
  for (const k of v6) {
    const a = e.v6.unassign(k, now);
    if (!a) continue;
    n++;
    log.info(
      { containerID: a.containerID, ipv6: a.ipv6, egressV4: a.egressV4 || null, pod: a.pod },
      'GC: no source vouches for this IPv6 allocation; released into cooldown',
    );
  }
  return { v4, v6: n };
}
