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

/**
 * Host-side veth name: `<prefix>` + lowercase hex of sha256(containerId, ifName), cut to
 * 15 characters in total. Same inputs → same name.
 * @throws Error if the prefix is invalid ({@link vethPrefixError}).
 */
export function hostVethName(prefix: string, containerId: string, ifName: string): string {
  const err = vethPrefixError(prefix);
  if (err) throw new Error(err);
  return (
    prefix +
    digest('name', containerId, ifName)
      .toString('hex')
      .slice(0, MAX_IFNAME_LEN - prefix.length)
  );
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
