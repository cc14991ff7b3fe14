/**
 * The audit's cross-checks: pure, sources in, findings out. Each finding says what
 * disagrees, what it means for the node's pods, and what to do. A source that could not
 * be read yields no finding of its own checks (the audit is then incomplete, not clean).
 *
 * ipamd's datastore (introspection) is the reference: every other source is compared
 * with what ipamd holds, never with each other only. When ipamd is down the checkpoint
 * stands in for it (`i.reference` names which, in every finding's text).
 */
import ipaddr from 'ipaddr.js';
import type { AuditInputs } from './collect.js';

/** Kinds of mismatch, stable names for scripts (`--output json`). */
export type FindingKind =
  | 'checkpoint-missing-allocation'
  | 'checkpoint-extra-allocation'
  | 'ec2-eni-missing'
  | 'ec2-ip-missing'
  | 'not-wired'
  | 'wired-without-allocation'
  | 'leaked-ip-rule'
  | 'veth-without-route'
  | 'allocation-without-pod'
  | 'pod-without-allocation'
  | 'pod-ip-differs'
  | 'kube-pod-without-allocation';

/** One mismatch. */
export interface Finding {
  kind: FindingKind;
  /** The IP, ENI or sandbox concerned, e.g. `10.0.0.23 (default/web-1)`. */
  subject: string;
  /** What disagrees, with the sources named. */
  detail: string;
  /** What it means for the node's pods. */
  meaning: string;
  /** What the operator should do. */
  action: string;
}

const who = (p?: { namespace: string; name: string }) => (p ? ` (${p.namespace}/${p.name})` : '');

/** True when `ip` is one of `secondary` or inside one of the `prefixes` (CIDRs). */
function ec2Holds(ip: string, secondary: string[], prefixes: string[]): boolean {
  if (secondary.includes(ip)) return true;
  const a = ipaddr.IPv4.parse(ip);
  return prefixes.some((c) => {
    try {
      return a.match(ipaddr.IPv4.parseCIDR(c));
    } catch {
      return false;
    }
  });
}

/** `ip rule del …` for each rule naming `ip`, or how to find them when the rules were not read. */
function deleteCommands(i: AuditInputs, ip: string): string {
  const bare = (s?: string) => s?.replace(/\/32$/, '');
  const cmds = i.rules
    .filter((r) => bare(r.src) === ip || bare(r.dst) === ip)
    .map(
      (r) =>
        `ip rule del prio ${r.priority}${r.src && r.src !== 'all' ? ` from ${r.src}` : ''}${r.dst ? ` to ${r.dst}` : ''}${r.table ? ` lookup ${r.table}` : ''}`,
    );
  return cmds.length ? `it: ${cmds.join('; ')}` : `them: ip rule show | grep -w ${ip}, then ip rule del each`;
}

/** One allocation ipamd (or the checkpoint standing in for it) holds. */
type Allocation = AuditInputs['allocations'][number];

/**
 * What every per-source check reads and writes: the audit's inputs, ipamd's allocations
 * indexed by pod IPv4 (dotted quad) and by sandbox (container) ID, and the findings so far
 * (each check appends; `auditFindings` sorts once at the end).
 */
interface CheckContext {
  i: AuditInputs;
  byIp: Map<string, Allocation>;
  byContainer: Map<string, Allocation>;
  out: Finding[];
}

/** `network/container/ifName`: the identity of an allocation in ipamd and in the checkpoint. */
const allocationKey = (a: { networkName: string; containerID: string; ifName: string }) =>
  `${a.networkName}/${a.containerID}/${a.ifName}`;

/** ipamd's allocations against the checkpoint file, both ways (when the file was read). */
function checkpointFindings(c: CheckContext): void {
  const { i, out } = c;
  if (!i.checkpoint.ok) return;
  const inFile = new Map(i.checkpoint.data.allocations.map((a) => [allocationKey(a), a]));
  const inMem = new Set(i.allocations.map(allocationKey));
  for (const a of i.allocations) {
    if (!inFile.has(allocationKey(a))) {
      out.push({
        kind: 'checkpoint-missing-allocation',
        subject: `${a.ipv4}${who(a.pod)}`,
        detail: `ipamd holds ${a.ipv4} for sandbox ${a.containerID.slice(0, 13)} but the checkpoint ${i.checkpoint.from} does not`,
        meaning:
          'a restart now would restore this allocation only from the runtime or the kernel; if ipamd keeps failing to write, allocations are at risk',
        action:
          "run the audit again (an ADD may have been in flight); if it stays, look for 'checkpoint' errors in ipamd's log (disk full, read-only mount)",
      });
    }
  }
  for (const [k, a] of inFile) {
    if (!inMem.has(k)) {
      out.push({
        kind: 'checkpoint-extra-allocation',
        subject: `${a.ipv4}${who(a.pod)}`,
        detail: `the checkpoint ${i.checkpoint.from} holds ${a.ipv4} for sandbox ${a.containerID.slice(0, 13)} but ipamd does not`,
        meaning:
          'the file and the running ipamd disagree: another process wrote it, or --checkpoint is not the file this ipamd writes',
        action:
          'run the audit again; check that only one ipamd runs on the node and that --checkpoint/ENI_IPAM_CHECKPOINT_PATH match its setting',
      });
    }
  }
}

/** ENIs and secondary IPs ipamd serves from against what EC2 describes (when EC2 was read). */
function ec2Findings(c: CheckContext): void {
  const { i, out } = c;
  if (!i.ec2.ok) return;
  const described = new Map(i.ec2.data.map((e) => [e.eniId, e]));
  for (const v of i.status.enis) {
    if (!described.has(v.eniId)) {
      out.push({
        kind: 'ec2-eni-missing',
        subject: v.eniId,
        detail: `${i.reference} serves from ${v.eniId}${v.deviceNumber >= 0 ? ` (device ${v.deviceNumber})` : ''} but EC2 does not describe it`,
        meaning: 'the ENI was deleted or detached outside ipamd: its pods have lost their addresses in the VPC',
        action:
          'delete the pods on this ENI (eni-ipam enis) so they get new addresses; find who deleted it (CloudTrail DeleteNetworkInterface/DetachNetworkInterface)',
      });
    }
  }
  for (const a of i.allocations) {
    const e = described.get(a.eniId);
    if (e && !ec2Holds(a.ipv4, e.secondaryIps, e.ipv4Prefixes)) {
      out.push({
        kind: 'ec2-ip-missing',
        subject: `${a.ipv4}${who(a.pod)}`,
        detail: `${i.reference} gave ${a.ipv4} to a pod from ${a.eniId}, but EC2 no longer has it on that ENI`,
        meaning:
          "the VPC drops this pod's traffic, and EC2 may give the address to another ENI or node: a duplicate IP",
        action:
          'delete the pod so it gets a new address; find who unassigned it (CloudTrail UnassignPrivateIpAddresses)',
      });
    }
  }
}

/** Allocations against the node's host routes, pod veths and ip rules (when the kernel was read). */
function kernelFindings(c: CheckContext): void {
  const { i, out, byIp } = c;
  if (!i.kernel.ok) return;
  const k = i.kernel.data;
  for (const a of i.allocations) {
    if (!k.pods.has(a.ipv4)) {
      out.push({
        kind: 'not-wired',
        subject: `${a.ipv4}${who(a.pod)}`,
        detail: `${i.reference} holds ${a.ipv4} but ${i.kernel.from} has no host route ${a.ipv4}/32 to a pod veth`,
        meaning: 'the pod cannot be reached from the node, or it is gone and its DEL never came',
        action:
          'check the pod (kubectl describe pod) and its sandbox (crictl pods); a dead sandbox is released by ipamd once every source agrees',
      });
    }
  }
  for (const [ip, r] of k.pods) {
    if (!byIp.has(ip)) {
      out.push({
        kind: 'wired-without-allocation',
        subject: ip,
        detail: `${i.kernel.from} routes ${ip}/32 to pod veth ${r.dev}, but ${i.reference} holds no allocation for ${ip}`,
        meaning: 'a pod uses an address ipamd may hand out again: a duplicate IP on the node',
        action: `find the pod on ${r.dev} (crictl pods; ip link show ${r.dev}); delete it so it is wired again through eni-ipam`,
      });
    }
  }
  const routed = new Set([...k.pods.values()].map((r) => r.dev));
  for (const dev of i.podVeths) {
    if (routed.has(dev)) continue;
    out.push({
      kind: 'veth-without-route',
      subject: dev,
      detail: `${i.kernel.from} has pod veth ${dev} (its peer in another netns) but no host route to it`,
      meaning:
        'a pod whose wiring was half undone (a DEL that failed midway) or never finished: it has no connectivity',
      action: `find its pod (ip -d link show ${dev}; crictl pods); if none is alive, ip link del ${dev}`,
    });
  }
  for (const ip of k.rulesOnly) {
    if (!byIp.has(ip)) {
      out.push({
        kind: 'leaked-ip-rule',
        subject: ip,
        detail: `${i.kernel.from} has ip rules for ${ip} but no route to a pod veth and no allocation`,
        meaning:
          'a DEL left its policy routing behind: the next pod given this address may route through the wrong table',
        action: `remove ${deleteCommands(i, ip)} (ipamd does not remove rules it did not make for a live allocation)`,
      });
    }
  }
}

/** Allocations against the runtime's ready sandboxes, both ways (when CRI was read). */
function criFindings(c: CheckContext): void {
  const { i, out, byContainer } = c;
  if (!i.cri.ok) return;
  const sandboxes = new Map(i.cri.data.map((s) => [s.id, s]));
  for (const a of i.allocations) {
    if (!sandboxes.has(a.containerID)) {
      out.push({
        kind: 'allocation-without-pod',
        subject: `${a.ipv4}${who(a.pod)}`,
        detail: `${i.reference} holds ${a.ipv4} for sandbox ${a.containerID.slice(0, 13)}, which ${i.cri.from} does not list as ready`,
        meaning:
          "the address is held for a pod that is gone (its DEL was lost): the pool is that much smaller until ipamd's GC releases it",
        action:
          'nothing if releases are allowed: ipamd releases it after every source agrees and the cooldown; if they are frozen (eni-ipam status), fix the reason first',
      });
    }
  }
  for (const s of i.cri.data) {
    if (!s.ip) continue; // host-network sandboxes use the node's address
    const a = byContainer.get(s.id);
    if (!a) {
      out.push({
        kind: 'pod-without-allocation',
        subject: `${s.ip} (${s.podNamespace}/${s.podName})`,
        detail: `${i.cri.from} lists ready sandbox ${s.id.slice(0, 13)} with ${s.ip}, but ${i.reference} holds no allocation for it`,
        meaning:
          'this pod got its address elsewhere (another CNI, a lost checkpoint): ipamd may give the same address to another pod',
        action: `delete the pod (kubectl delete pod -n ${s.podNamespace} ${s.podName}) so it is created again through eni-ipam; check /etc/cni/net.d for another plugin`,
      });
    } else if (a.ipv4 !== s.ip) {
      out.push({
        kind: 'pod-ip-differs',
        subject: `${s.podNamespace}/${s.podName}`,
        detail: `${i.cri.from} says sandbox ${s.id.slice(0, 13)} has ${s.ip}; ${i.reference} allocated ${a.ipv4}`,
        meaning: 'the pod uses an address ipamd does not hold for it, and ipamd holds one the pod does not use',
        action: 'delete the pod so it is wired again; look for a second CNI plugin in /etc/cni/net.d',
      });
    }
  }
}

/** Pods the Kubernetes API places on this node with an IP ipamd does not hold (when the API was read). */
function kubeFindings(c: CheckContext): void {
  const { i, out, byIp } = c;
  if (!i.kube.ok) return;
  for (const p of i.kube.data) {
    if (p.hostNetwork || !p.podIP || p.phase === 'Succeeded' || p.phase === 'Failed' || byIp.has(p.podIP)) continue;
    if (i.cri.ok && i.cri.data.some((s) => s.ip === p.podIP)) continue; // already reported from the runtime
    out.push({
      kind: 'kube-pod-without-allocation',
      subject: `${p.podIP} (${p.namespace}/${p.name})`,
      detail: `the Kubernetes API says pod ${p.namespace}/${p.name} on this node has ${p.podIP}, but ${i.reference} holds no allocation for it`,
      meaning: 'either the pod is gone and its status is stale, or it uses an address ipamd may give again',
      action: `kubectl get pod -n ${p.namespace} ${p.name} -o wide; delete it if it is running with this address`,
    });
  }
}

/** Every mismatch among the sources, in a stable order (by kind, then subject). */
export function auditFindings(i: AuditInputs): Finding[] {
  const c: CheckContext = {
    i,
    byIp: new Map(i.allocations.map((a) => [a.ipv4, a])),
    byContainer: new Map(i.allocations.map((a) => [a.containerID, a])),
    out: [],
  };
  checkpointFindings(c);
  ec2Findings(c);
  kernelFindings(c);
  criFindings(c);
  kubeFindings(c);
  return c.out.sort(
    (x, y) => x.kind.localeCompare(y.kind) || x.subject.localeCompare(y.subject, undefined, { numeric: true }),
  );
}
