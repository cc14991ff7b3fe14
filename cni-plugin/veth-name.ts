/**
 * Deterministic names and MAC addresses of the veth pair for one attachment
 * (container id + interface name), so ADD and DEL compute the same host device without
 * any state, and the result can report both MACs before the kernel is touched.
 */
import { createHash } from 'node:crypto';
import { echo } from './errors.js';

/** Linux IFNAMSIZ − 1: the longest interface name the kernel accepts. */
export const MAX_IFNAME_LEN = 15;
/** Longest veth prefix (AWS_VPC_K8S_CNI_VETHPREFIX is limited to 4 characters). */
export const MAX_VETH_PREFIX_LEN = 4;
/** Prefixes reserved for other devices (as in amazon-vpc-cni-k8s): `eth`, `vlan`, `lo`. */
export const RESERVED_VETH_PREFIXES: readonly string[] = ['eth', 'vlan', 'lo'];

/**
 * Checks a host veth prefix: 1-4 characters of `[A-Za-z0-9_-]`, not a reserved prefix.
 * @returns an error message, or undefined when the prefix is valid.
 */
export function vethPrefixError(prefix: string): string | undefined {
  if (prefix.length < 1 || prefix.length > MAX_VETH_PREFIX_LEN)
    return `vethPrefix must be 1-${MAX_VETH_PREFIX_LEN} characters, got ${echo(prefix)}`;
  if (!/^[A-Za-z0-9_-]+$/.test(prefix))
    return `vethPrefix may only contain letters, digits, '_' and '-', got ${echo(prefix)}`;
  if (RESERVED_VETH_PREFIXES.includes(prefix))
    return `vethPrefix ${echo(prefix)} is reserved (${RESERVED_VETH_PREFIXES.join(', ')})`;
  return undefined;
}

/** Checks an interface name as the kernel would: 1-15 chars, no '/', ':', whitespace, not '.' or '..'. */
export function ifNameError(name: string): string | undefined {
  if (name.length < 1 || name.length > MAX_IFNAME_LEN)
    return `interface name must be 1-${MAX_IFNAME_LEN} characters, got ${echo(name)}`;
  if (/[\s/:]/.test(name) || name === '.' || name === '..') return `invalid interface name ${echo(name)}`;
  return undefined;
}

function digest(salt: string, containerId: string, ifName: string): Buffer {
  return createHash('sha256').update(`${salt}\0${containerId}\0${ifName}`).digest();
}

/** First `n` lowercase hex digits of sha1(`s`). */
const sha1Hex = (s: string, n: number): string => createHash('sha1').update(s).digest('hex').slice(0, n);

/** Hex digits of the pod hash in a host veth name, as amazon-vpc-cni-k8s cuts it. */
export const POD_HASH_HEX = 11;

/**
 * The host veth name amazon-vpc-cni-k8s gives a pod's interface, which Calico, Cilium
 * and the aws-network-policy-agent compute to find it: `<prefix>` + the first 11 hex
 * digits of sha1(`<namespace>.<pod name>`), and for an extra interface (index ≥ 1)
 * sha1(`<namespace>.<pod name>.<index>`) (pkg/networkutils/names.go,
 * `GeneratePodHostVethName`). `podKey` may be a string suffix instead of an index (an
 * ifName upstream has no index for, see {@link hostVethNames}).
 * @throws Error if the prefix is invalid ({@link vethPrefixError}).
 */
export function podHostVethName(
  prefix: string,
  namespace: string,
  podName: string,
  podKey: number | string = 0,
): string {
  const err = vethPrefixError(prefix);
  if (err) throw new Error(err);
  const name = podKey === 0 || podKey === '' ? podName : `${podName}.${podKey}`;
  return prefix + sha1Hex(`${namespace}.${name}`, POD_HASH_HEX);
}

/**
 * The host veth name eni-ipam gave every attachment before it named them as
 * amazon-vpc-cni-k8s does: `<prefix>` + lowercase hex of sha256(containerId, ifName), cut
 * to 15 characters in total. Pods wired then keep this name until they go; DEL, CHECK,
 * GC and restore look for it after the current name ({@link hostVethNames}). It is also
 * the current name of an attachment whose pod is not known (no K8S_POD_NAMESPACE /
 * K8S_POD_NAME: a runtime other than the kubelet).
 * @throws Error if the prefix is invalid ({@link vethPrefixError}).
 */
export function legacyHostVethName(prefix: string, containerId: string, ifName: string): string {
  const err = vethPrefixError(prefix);
  if (err) throw new Error(err);
  return (
    prefix +
    digest('name', containerId, ifName)
      .toString('hex')
      .slice(0, MAX_IFNAME_LEN - prefix.length)
  );
}

/** The pod of an attachment, from CNI_ARGS (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`) or ipamd's allocation. */
export interface PodName {
  namespace: string;
  name: string;
}

/** One attachment as the naming sees it: the CNI key, and its pod when known. */
export interface VethOwner {
  containerId: string;
  ifName: string;
  /** Absent (or with an empty field): the pod is unknown and the name comes from the key. */
  pod?: PodName | undefined;
}

/** The interface name upstream gives the pod end of the interface of index n ≥ 1 (`mNicIf<n>`). */
const EXTRA_IF = /^mNicIf([1-9][0-9]*)$/;

/**
 * The pod key of `ifName` in the upstream name: `eth0` (the kubelet's interface) → 0,
 * upstream's `mNicIf<n>` → n; any other interface name → the name itself, so a second
 * attachment of the same pod (a chained runtime asking for `net1`) never takes the first's
 * host veth.
 */
function podKeyOf(ifName: string): number | string {
  if (ifName === 'eth0') return 0;
  const m = EXTRA_IF.exec(ifName);
  return m ? Number(m[1]) : ifName;
}

/**
 * Every name the host veth of `o` may have on this node, the one ADD gives first: the
 * upstream name from its pod ({@link podHostVethName}) when the pod is known, then the
 * name eni-ipam gave before ({@link legacyHostVethName}). The upstream name is per pod,
 * not per sandbox: two sandboxes of one pod (a fast re-create) share it, so whoever
 * deletes a veth by these names checks that its MAC is `hostVethMac(o)` first.
 * @throws Error if the prefix is invalid.
 */
export function hostVethNames(prefix: string, o: VethOwner): string[] {
  const legacy = legacyHostVethName(prefix, o.containerId, o.ifName);
  if (!knowsPod(o)) return [legacy];
  return [podHostVethName(prefix, o.pod!.namespace, o.pod!.name, podKeyOf(o.ifName)), legacy];
}

/**
 * True when `o` names its pod (namespace and name both non-empty). Without it the host
 * veth's name cannot be computed when ADD knew the pod (a DEL without `CNI_ARGS`, an
 * allocation ipamd adopted from the kernel): the deletes then also look the link up by
 * its MAC (veth-delete.ts `deleteOwnedVeth`).
 */
export const knowsPod = (o: VethOwner): boolean => !!o.pod?.namespace && !!o.pod.name;

/**
 * The host veth name ADD gives the attachment `o` ({@link hostVethNames}' first).
 * @throws Error if the prefix is invalid.
 */
export function hostVethName(prefix: string, o: VethOwner): string {
  return hostVethNames(prefix, o)[0]!;
}

/**
 * The host end of an IPv6 pod's IPv4 egress pair. amazon-vpc-cni-k8s's egress plugin
 * names it `veth` + random hex (containernetworking's `ip.SetupVeth`), outside the
 * policy engines' prefix so none of them takes it for the pod's interface; eni-ipam uses
 * the same `veth` form with 11 hex digits of sha1(`<containerId>/<ifName>/<egress if>`),
 * so DEL and GC find it without the pod's netns.
 */
export function egressHostVethName(containerId: string, ifName: string, egressIf: string): string {
  return `veth${sha1Hex(`${containerId}/${ifName}/${egressIf}`, MAX_IFNAME_LEN - 4)}`;
}

/** A locally administered unicast MAC (`xx:xx:xx:xx:xx:xx`, lowercase) from the first 6 bytes of `b`. */
function macFrom(b: Buffer): string {
  const bytes = [...b.subarray(0, 6)];
  bytes[0] = (bytes[0]! & 0xfc) | 0x02; // unicast, locally administered
  return bytes.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/** MAC of the host end of the veth (the pod's neighbour entry for 169.254.1.1 points at it). */
export function hostVethMac(containerId: string, ifName: string): string {
  return macFrom(digest('host-mac', containerId, ifName));
}

/** MAC of the pod end of the veth. */
export function podVethMac(containerId: string, ifName: string): string {
  return macFrom(digest('pod-mac', containerId, ifName));
}

/** The {@link VethOwner} of a CNI invocation: its key, and its pod from CNI_ARGS (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`). */
export function vethOwnerOf(env: {
  containerId: string;
  ifName: string;
  args: { podNamespace: string; podName: string };
}): VethOwner {
  return {
    containerId: env.containerId,
    ifName: env.ifName,
    pod: { namespace: env.args.podNamespace, name: env.args.podName },
  };
}
