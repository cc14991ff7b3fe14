/**
 * The restore merge (DESIGN §4), pure: given what the datastore holds and what each
 * evidence source reported, decide which allocations are live, which runtime sandboxes
 * to adopt, and which allocations may be released.
 *
 * - An allocation is **live** if any readable source vouches for it: the CRI runtime
 *   (a READY sandbox whose id is the allocation's container id, or whose IP is the
 *   allocation's IP) or Kubernetes (a non-host-network pod on this node with that IP or
 *   that pod uid).
 * - A READY sandbox that no allocation covers is **adopted** when its IP is on one of
 *   our ENIs and free; if another allocation holds that IP, it is a conflict (logged,
 *   nothing changes). A sandbox whose CNI DEL ipamd already served is never adopted
 *   (`stale`): the runtime's list was read before the DEL (the read and the merge are
 *   not atomic), or its StopPodSandbox is under way (containerd tears the network down
 *   first, while the sandbox is still READY). Adopting it would hand a dead sandbox an
 *   IP that meanwhile went back to the pool — or to an unassign in flight at EC2.
 * - An allocation is **released** only when every source that could vouch for it was
 *   read successfully, none does, and it is older than `graceMs` (an ADD in progress has
 *   no READY sandbox yet). An unreadable source means no release at all.
 */
import type { Allocation } from '../datastore/types.js';

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

/** Inputs of {@link mergeEvidence}. */
export interface MergeInput {
  allocations: Allocation[];
  cri: SourceRead<SandboxEvidence>;
  /** `absent` when no Kubernetes source is configured (it cannot vouch, so it is not waited for). */
  kube: SourceRead<PodEvidence>;
  /** True if the IP is a secondary IP on one of our ENIs. */
  isOurIp: (ip: string) => boolean;
  /** Holder of an IP in the datastore, if any. */
  holderOf: (ip: string) => Allocation | undefined;
  /** True if ipamd served a DEL (or GC) for this container id since it last assigned it (`Datastore.wasReleased`). */
  wasReleased?: (containerID: string) => boolean;
  now: number;
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
  /** True when releases are allowed at all (every source that could vouch was read). */
  canRelease: boolean;
}

/** Applies the rules of the module docstring. Pure. */
export function mergeEvidence(i: MergeInput): MergeResult {
  const cri = i.cri.ok === true ? i.cri.items : [];
  const pods = i.kube.ok === true ? i.kube.items.filter((p) => !p.hostNetwork) : [];
  const byId = new Set(cri.map((s) => s.id));
  const criIps = new Set(cri.map((s) => s.ip).filter((x): x is string => !!x));
  const podIps = new Set(pods.map((p) => p.podIP).filter((x): x is string => !!x));
  const podUids = new Set(pods.map((p) => p.uid));
  const vouched = (a: Allocation) => byId.has(a.containerID) || criIps.has(a.ipv4) || podIps.has(a.ipv4) || (!!a.pod?.uid && podUids.has(a.pod.uid));

  const canRelease = i.cri.ok === true && i.kube.ok !== false;
  const live: Allocation[] = [];
  const release: Allocation[] = [];
  for (const a of i.allocations) {
    if (vouched(a)) live.push(a);
    else if (canRelease && i.now - a.allocatedAt >= i.graceMs) release.push(a);
    else live.push(a);
  }

  const adopt: Allocation[] = [];
  const conflicts: MergeResult['conflicts'] = [];
  const foreign: SandboxEvidence[] = [];
  const stale: SandboxEvidence[] = [];
  const covered = new Set(i.allocations.map((a) => a.containerID));
  for (const s of cri) {
    if (covered.has(s.id) || !s.ip) continue;
    if (i.wasReleased?.(s.id)) {
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
      networkName: i.networkName, containerID: s.id, ifName: i.ifName, ipv4: s.ip, eniId: '', allocatedAt: i.now,
      pod: { namespace: s.podNamespace, name: s.podName, uid: s.podUid },
    });
  }
  return { live, adopt, release, conflicts, stale, foreign, canRelease };
}
