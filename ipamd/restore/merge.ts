/**
 * The restore merge (docs/design.md#4-restore-after-restart), pure: given what the datastore holds and what each
 * evidence source reported, decide which allocations are live, which runtime sandboxes
 * to adopt, and which allocations may be released.
 *
 * - An allocation is **live** if any readable source vouches for it: the CRI runtime
 *   (a READY sandbox whose id is the allocation's container id, or whose IP is the
 *   allocation's IP), Kubernetes (a non-host-network pod on this node with that IP or
 *   that pod uid), or the node's kernel (a `/32` host route to a veth whose peer is in
 *   another netns; kernel-parse.ts). A suspect source still vouches.
 * - A READY sandbox that no allocation covers is **adopted** when its IP is on one of
 *   our ENIs and free; if another allocation holds that IP, it is a conflict (logged,
 *   nothing changes). A sandbox whose CNI DEL ipamd already served is never adopted
 *   (`stale`): the runtime's list was read before the DEL (the read and the merge are
 *   not atomic), or its StopPodSandbox is under way (containerd tears the network down
 *   first, while the sandbox is still READY). Adopting it would hand a dead sandbox an
 *   IP that meanwhile went back to the pool — or to an unassign in flight at EC2.
 * - An allocation is **released** only when every source that could vouch for it was
 *   read successfully, none is suspect (plausibility.ts), none vouches, it was made at
 *   least `graceMs` before the reads began (`readAt`: an ADD in progress has no READY
 *   sandbox yet, and an ADD served while the reads were in flight is not in what they
 *   returned, however long the pass then took), and the release brake
 *   (release-brake.ts) lets the pass through. An unreadable or suspect source means no
 *   release at all.
 * - Unverified IPs (start-up without a checkpoint) that the kernel shows wired to a pod
 *   are never verified free (`keepUnverified`).
 */
import type { Allocation } from '../datastore/types.js';
import {
  coverage,
  formatIdentity,
  runtimeIdentityVerdict,
  SANDBOX_LISTED_WITHIN_MS,
  type Coverage,
  type RuntimeIdentity,
} from './plausibility.js';
import { applyBrake, confirmedGone, type BrakeVerdict } from './release-brake.js';

/** A READY sandbox as the CRI runtime reports it. */
export interface SandboxEvidence {
  id: string;
  podName: string;
  podNamespace: string;
  podUid: string;
  ip?: string;
}

/** A pod bound to this node as the Kubernetes API reports it. */
export interface PodEvidence {
  namespace: string;
  name: string;
  uid: string;
  podIP?: string;
  hostNetwork: boolean;
}

/** One source's read: `ok: false` means it could not be read (its data is ignored). */
export type SourceRead<T> = { ok: true; items: T[] } | { ok: false; reason: string } | { ok: 'absent' };

/** The kernel's read: the pod IPs it shows wired (kernel-parse.ts) and how many pod veths exist at all. */
/** The kernel's read; `devOf` (pod address → its route's host veth `dev`) where the reader keeps it. */
export type KernelRead =
  | { ok: true; podIps: ReadonlySet<string>; podVeths: number; devOf?: ReadonlyMap<string, { dev: string }> }
  | { ok: false; reason: string };

/** Inputs of {@link mergeEvidence}. */
export interface MergeInput {
  allocations: Allocation[];
  cri: SourceRead<SandboxEvidence>;
  /** `absent` when no Kubernetes source is configured (it cannot vouch, so it is not waited for). */
  kube: SourceRead<PodEvidence>;
  /** The node's kernel; always configured (it cannot be misconfigured away). */
  kernel: KernelRead;
  /** IPs marked unverified (start-up without a checkpoint); default none. */
  unverifiedIps?: string[];
  /** The runtime's endpoint, for reasons (`unix:///run/containerd/containerd.sock`). */
  criEndpoint?: string;
  /** The runtime's CRI `Version` answer, when it gave one. */
  criIdentity?: RuntimeIdentity;
  /** `status.nodeInfo.containerRuntimeVersion` of this node (Kubernetes source on and the node read). */
  nodeRuntimeVersion?: string;
  /** The runtime identity this boot's checkpoint recorded. */
  recordedIdentity?: RuntimeIdentity;
  /** This node's name as the Kubernetes source uses it (MY_NODE_NAME), for reasons. */
  nodeName?: string;
  /** True if the IP is a secondary IP on one of our ENIs. */
  isOurIp: (ip: string) => boolean;
  /** Holder of an IP in the datastore, if any. */
  holderOf: (ip: string) => Allocation | undefined;
  /** True if ipamd served a DEL (or GC) for this container id since it last assigned it (`Datastore.wasUnassigned`). */
  wasUnassigned?: (containerID: string) => boolean;
  now: number;
  /**
   * When the source reads began (ms; default `now`). The grace is counted from here, not
   * from `now`: an allocation made after the reads began (while they were in flight, or
   * while the event loop stalled after them) is absent from them and is never a release
   * candidate of this pass.
   */
  readAt?: number;
  graceMs: number;
  /** CNI network name and ifName used for adopted sandboxes. */
  networkName: string;
  ifName: string;
}

/** What the merge decided. */
export interface MergeResult {
  live: Allocation[];
  adopt: Allocation[];
  release: Allocation[];
  conflicts: Array<{ sandbox: SandboxEvidence; holder: Allocation }>;
  /** Sandboxes not adopted because ipamd already served their DEL (see the module docstring). */
  stale: SandboxEvidence[];
  /** Sandboxes with an IP that is not on our ENIs (another network, or IMDS/EC2 lag). */
  foreign: SandboxEvidence[];
  /**
   * True when releases are allowed at all: every source that could vouch was read, none
   * is suspect, and the brake did not hold. Also gates verifying unverified IPs free.
   */
  canRelease: boolean;
  /** Why a source's silence is not believed (plausibility.ts), by source. */
  suspect: { cri?: string; kube?: string };
  /** Coverage of kernel-wired held addresses by source (undefined when not judged). */
  coverage: { cri?: Coverage; kube?: Coverage };
  /** The brake's verdict (undefined when releases were not allowed anyway). */
  brake?: BrakeVerdict;
  /** Allocations no other source vouched for that the kernel kept live. */
  kernelVouched: Allocation[];
  /** Unverified IPs the kernel shows wired to a pod: never verified free. */
  keepUnverified: string[];
  /** True when the runtime's identity may be recorded as this boot's (read, known, not suspect). */
  identityTrusted: boolean;
}

/**
 * What the readable sources show, indexed for the merge: the READY sandboxes (none when the
 * runtime was not read), the non-host-network pods (none when Kubernetes was not read), the
 * IPs the kernel shows wired (none when not read), and per allocation whether the runtime
 * or Kubernetes knows it and whether it is older than the grace.
 */
interface Evidence {
  cri: SandboxEvidence[];
  pods: PodEvidence[];
  kernelIps: ReadonlySet<string>;
  /** The sandboxes' IPs. */
  criIps: ReadonlySet<string>;
  /** The pods' IPs. */
  podIps: ReadonlySet<string>;
  /** True when a sandbox has the allocation's container id or IP. */
  criKnows: (a: Allocation) => boolean;
  /** True when a pod has the allocation's IP or pod uid. */
  kubeKnows: (a: Allocation) => boolean;
  /** True when the allocation was made at least `graceMs` before the reads began (`readAt ?? now`, ms). */
  old: (a: Allocation) => boolean;
  /** True when a right runtime lists the allocation's sandbox by now: made {@link SANDBOX_LISTED_WITHIN_MS} (or `graceMs`, if shorter) before the reads began. */
  listable: (a: Allocation) => boolean;
}

/** Indexes `i`'s source reads for {@link mergeEvidence}. Pure. */
function indexEvidence(i: MergeInput): Evidence {
  const cri = i.cri.ok === true ? i.cri.items : [];
  const pods = i.kube.ok === true ? i.kube.items.filter((p) => !p.hostNetwork) : [];
  const kernelIps: ReadonlySet<string> = i.kernel.ok ? i.kernel.podIps : new Set();
  const byId = new Set(cri.map((s) => s.id));
  const criIps = new Set(cri.map((s) => s.ip).filter((x): x is string => !!x));
  const podIps = new Set(pods.map((p) => p.podIP).filter((x): x is string => !!x));
  const podUids = new Set(pods.map((p) => p.uid));
  const criKnows = (a: Allocation) => byId.has(a.containerID) || criIps.has(a.ipv4);
  const kubeKnows = (a: Allocation) => podIps.has(a.ipv4) || (!!a.pod?.uid && podUids.has(a.pod.uid));
  const age = (a: Allocation) => (i.readAt ?? i.now) - a.allocatedAt;
  const old = (a: Allocation) => age(a) >= i.graceMs;
  const listable = (a: Allocation) => age(a) >= Math.min(i.graceMs, SANDBOX_LISTED_WITHIN_MS);
  return { cri, pods, kernelIps, criIps, podIps, criKnows, kubeKnows, old, listable };
}

/**
 * Plausibility (plausibility.ts), judged on the held addresses the kernel shows wired to a
 * pod (allocations, and unverified IPs): each read source's coverage of them, and why its
 * silence is not believed (a coverage too low, or for the runtime an identity that does not
 * match the node's or the checkpoint's). The runtime is judged on every wired allocation
 * whose sandbox it lists by now (`listable`: any age past the seconds containerd takes to
 * list a served sandbox), Kubernetes on those older than the grace. Nothing is judged
 * without the kernel's read. Pure.
 */
function judgeSources(i: MergeInput, ev: Evidence): Pick<MergeResult, 'suspect' | 'coverage'> {
  const { cri, pods, kernelIps, criIps, podIps, criKnows, kubeKnows, old, listable } = ev;
  const wired = i.kernel.ok ? i.allocations.filter((a) => kernelIps.has(a.ipv4)) : [];
  const wiredAllocs = wired.filter(old);
  const wiredListable = wired.filter(listable);
  const wiredUnverified = i.kernel.ok ? (i.unverifiedIps ?? []).filter((ip) => kernelIps.has(ip)) : [];
  const base = wiredAllocs.length + wiredUnverified.length;
  const suspect: MergeResult['suspect'] = {};
  const cov: MergeResult['coverage'] = {};
  const held = i.allocations.length;
  const heldText =
    held > 0 || wiredUnverified.length === 0 ? `the checkpoint holds ${held} from this boot` : 'there is no checkpoint';
  if (i.kernel.ok && i.cri.ok === true) {
    const c = (cov.cri = coverage(
      wiredListable.length + wiredUnverified.length,
      wiredListable.filter(criKnows).length + wiredUnverified.filter((ip) => criIps.has(ip)).length,
    ));
    const who = `runtime at ${i.criEndpoint ?? 'the CRI endpoint'} (${formatIdentity(i.criIdentity)})`;
    if (c.suspect)
      suspect.cri = `${who} answered with ${cri.length} sandboxes and knows ${c.known} of the ${c.base} pods the kernel shows wired; ${heldText} and the kernel shows ${i.kernel.podVeths} pod veths`;
    const idWhy = runtimeIdentityVerdict(i.criEndpoint ?? 'the CRI endpoint', {
      ...(i.criIdentity ? { runtime: i.criIdentity } : {}),
      ...(i.nodeRuntimeVersion ? { nodeRuntimeVersion: i.nodeRuntimeVersion } : {}),
      ...(i.recordedIdentity ? { recorded: i.recordedIdentity } : {}),
      cov: c,
      heldOld: i.allocations.filter(old).length,
    });
    if (idWhy) suspect.cri = suspect.cri ? `${suspect.cri}; ${idWhy}` : idWhy;
  }
  if (i.kernel.ok && i.kube.ok === true) {
    const c = (cov.kube = coverage(
      base,
      wiredAllocs.filter(kubeKnows).length + wiredUnverified.filter((ip) => podIps.has(ip)).length,
    ));
    if (c.suspect)
      suspect.kube = `Kubernetes lists ${pods.length} pods on node ${i.nodeName ?? '(MY_NODE_NAME)'} and knows ${c.known} of the ${c.base} pods the kernel shows wired; ${heldText} and the kernel shows ${i.kernel.podVeths} pod veths (is MY_NODE_NAME this node's name?)`;
  }
  return { suspect, coverage: cov };
}

/** An allocation no source vouches for; `confirmed` when more than one source says it is gone (release-brake.ts). */
interface ReleaseCandidate {
  a: Allocation;
  confirmed: boolean;
}

/**
 * Sorts the allocations, in order: live when the runtime or Kubernetes knows it, or the
 * kernel shows it wired (then also `kernelVouched`); a release candidate when no source
 * vouches, the sources are `trusted` (all read, none suspect) and it is older than the
 * grace; live otherwise. Pure.
 */
function sortAllocations(
  i: MergeInput,
  ev: Evidence,
  trusted: boolean,
): { live: Allocation[]; kernelVouched: Allocation[]; candidates: ReleaseCandidate[] } {
  const live: Allocation[] = [];
  const kernelVouched: Allocation[] = [];
  const candidates: ReleaseCandidate[] = [];
  for (const a of i.allocations) {
    if (ev.criKnows(a) || ev.kubeKnows(a)) live.push(a);
    else if (ev.kernelIps.has(a.ipv4)) {
      live.push(a);
      kernelVouched.push(a);
    } else if (trusted && ev.old(a)) {
      // The kernel's silence counts only from a view that shows pod veths at all (not the wrong netns).
      const kernelSaysGone = i.kernel.ok && i.kernel.podVeths > 0;
      candidates.push({ a, confirmed: confirmedGone({ cri: true, kube: i.kube.ok === true, kernel: kernelSaysGone }) });
    } else live.push(a);
  }
  return { live, kernelVouched, candidates };
}

/**
 * The release brake over the `candidates` of `held` allocations: `release` when the sources
 * are `trusted` and the brake lets the pass through, else `kept` (to stay live); `brake` is
 * the verdict (undefined when not `trusted`). Pure.
 */
function brakeCandidates(
  held: number,
  candidates: ReleaseCandidate[],
  trusted: boolean,
): { brake: BrakeVerdict | undefined; release: Allocation[]; kept: Allocation[] } {
  let brake: BrakeVerdict | undefined;
  let release: Allocation[] = [];
  let kept: Allocation[] = [];
  if (trusted) {
    const single = candidates.filter((c) => !c.confirmed).length;
    brake = applyBrake({ held, single, confirmed: candidates.length - single, sources: 'the runtime' });
    if (brake.held) kept = candidates.map((c) => c.a);
    else release = candidates.map((c) => c.a);
  } else kept = candidates.map((c) => c.a);
  return { brake, release, kept };
}

/**
 * The READY sandboxes `cri` that no allocation covers, in order: `stale` when ipamd already
 * served their DEL, `foreign` when their IP is not on our ENIs, a conflict when another
 * allocation holds their IP, else adopted (an allocation on `i.networkName`/`i.ifName`
 * made `i.now`). Sandboxes without an IP are skipped.
 */
function adoptSandboxes(
  i: MergeInput,
  cri: SandboxEvidence[],
): Pick<MergeResult, 'adopt' | 'conflicts' | 'foreign' | 'stale'> {
  const adopt: Allocation[] = [];
  const conflicts: MergeResult['conflicts'] = [];
  const foreign: SandboxEvidence[] = [];
  const stale: SandboxEvidence[] = [];
  const covered = new Set(i.allocations.map((a) => a.containerID));
  for (const s of cri) {
    if (covered.has(s.id) || !s.ip) continue;
    if (i.wasUnassigned?.(s.id)) {
      stale.push(s);
      continue;
    }
    if (!i.isOurIp(s.ip)) {
      foreign.push(s);
      continue;
    }
    const holder = i.holderOf(s.ip);
    if (holder) {
      if (holder.containerID !== s.id) conflicts.push({ sandbox: s, holder });
      continue;
    }
    adopt.push({
      networkName: i.networkName,
      containerID: s.id,
      ifName: i.ifName,
      ipv4: s.ip,
      eniId: '',
      allocatedAt: i.now,
      pod: { namespace: s.podNamespace, name: s.podName, uid: s.podUid },
    });
  }
  return { adopt, conflicts, foreign, stale };
}

/** Applies the rules of the module docstring. Pure. */
export function mergeEvidence(i: MergeInput): MergeResult {
  const ev = indexEvidence(i);
  // Plausibility: judged on the held addresses the kernel shows wired to a pod.
  const { suspect, coverage: cov } = judgeSources(i, ev);
  const held = i.allocations.length;

  const readable = i.cri.ok === true && i.kube.ok !== false && i.kernel.ok;
  const trusted = readable && !suspect.cri && !suspect.kube;
  const { live, kernelVouched, candidates } = sortAllocations(i, ev, trusted);
  const { brake, release, kept } = brakeCandidates(held, candidates, trusted);
  live.push(...kept);
  const canRelease = trusted && !brake?.held;

  const { adopt, conflicts, foreign, stale } = adoptSandboxes(i, ev.cri);
  const adoptedIps = new Set(adopt.map((a) => a.ipv4));
  const keepUnverified = (i.unverifiedIps ?? []).filter((ip) => ev.kernelIps.has(ip) && !adoptedIps.has(ip));
  return {
    live,
    adopt,
    release,
    conflicts,
    stale,
    foreign,
    canRelease,
    suspect,
    coverage: cov,
    ...(brake ? { brake } : {}),
    kernelVouched,
    keepUnverified,
    identityTrusted: i.cri.ok === true && !!i.criIdentity && !suspect.cri && i.kernel.ok,
  };
}
