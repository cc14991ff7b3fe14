/**
 * Encodes the ADD result and the VERSION answer in the version the runtime asked for
 * (CNI spec "Success" result; 0.3.x/0.4.0 carry `"version":"4"` or `"6"` in each IP
 * config, 1.0.0 dropped it, 1.1.0 added the optional interface `mtu`).
 */
import { POD_GATEWAY_V6, POD_V6_PREFIX_LEN } from './families.js';
import { LATEST_VERSION, SUPPORTED_VERSIONS } from './versions.js';

/** Link-local gateway every pod routes through (its neighbour entry points at the host veth). */
export const POD_GATEWAY = '169.254.1.1';

/** What ADD set up, independent of the result version. */
export interface Attachment {
  /** Host end of the veth (in the node's netns). */
  hostVeth: { name: string; mac: string };
  /** Pod end: CNI_IFNAME, its MAC, and the netns path (CNI_NETNS). */
  pod: { ifName: string; mac: string; netns: string };
  /** Pod IPv4 address, dotted quad without a prefix length; '' for an IPv6-only pod. */
  ipv4: string;
  /** Pod IPv6 address (`ipv6`, `dual`), without a prefix length. */
  ipv6?: string;
  /** `ipv6` mode: the egress pair (host end, pod end `v4if0`) and its IPv4 address. */
  egress?: { hostVeth: { name: string; mac: string }; pod: { ifName: string; mac: string }; ipv4: string };
  /** MTU in bytes of both veth ends. */
  mtu: number;
}

interface Iface {
  name: string;
  mac: string;
  sandbox?: string;
  mtu?: number;
}
interface IpConfig {
  version?: '4' | '6';
  address: string;
  gateway: string;
  interface: number;
}

/** The ADD result object for `cniVersion` (one of the supported versions). */
export interface AddResult {
  cniVersion: string;
  interfaces: Iface[];
  ips: IpConfig[];
  routes: { dst: string }[];
  dns: Record<string, never>;
}

/**
 * Builds the ADD result: interfaces [host veth, pod interface with `sandbox`] (then, for an
 * IPv6 pod with IPv4 egress, [egress host veth, `v4if0` with `sandbox`]); IPs on index 1:
 * `<ipv4>/32` via 169.254.1.1 and/or `<ipv6>/128` via fe80::1; the egress `<ip>/32` via
 * 169.254.1.1 on index 3; routes `0.0.0.0/0` (any IPv4 on the pod) and `::/0` (IPv6);
 * empty DNS. `version` ("4"/"6") only for 0.3.0/0.3.1/0.4.0; interface `mtu` only for 1.1.0.
 */
export function encodeAddResult(cniVersion: string, a: Attachment): AddResult {
  const legacy = cniVersion.startsWith('0.');
  const withMtu = cniVersion === '1.1.0';
  const iface = (name: string, mac: string, sandbox?: string): Iface => ({
    name,
    mac,
    ...(sandbox !== undefined ? { sandbox } : {}),
    ...(withMtu ? { mtu: a.mtu } : {}),
  });
  const ipc = (version: '4' | '6', address: string, gateway: string, index: number): IpConfig =>
    legacy ? { version, address, gateway, interface: index } : { address, gateway, interface: index };
  const interfaces = [iface(a.hostVeth.name, a.hostVeth.mac), iface(a.pod.ifName, a.pod.mac, a.pod.netns)];
  const ips: IpConfig[] = [];
  if (a.ipv4) ips.push(ipc('4', `${a.ipv4}/32`, POD_GATEWAY, 1));
  if (a.ipv6) ips.push(ipc('6', `${a.ipv6}/${POD_V6_PREFIX_LEN}`, POD_GATEWAY_V6, 1));
  if (a.egress) {
    interfaces.push(
      iface(a.egress.hostVeth.name, a.egress.hostVeth.mac),
      iface(a.egress.pod.ifName, a.egress.pod.mac, a.pod.netns),
    );
    ips.push(ipc('4', `${a.egress.ipv4}/32`, POD_GATEWAY, 3));
  }
  const routes: { dst: string }[] = [];
  if (a.ipv4 || a.egress) routes.push({ dst: '0.0.0.0/0' });
  if (a.ipv6) routes.push({ dst: '::/0' });
  return { cniVersion, interfaces, ips, routes, dns: {} };
}

/** The `VERSION` answer: `{"cniVersion":"1.1.0","supportedVersions":[...]}`. */
export function versionResult(): { cniVersion: string; supportedVersions: string[] } {
  return { cniVersion: LATEST_VERSION, supportedVersions: [...SUPPORTED_VERSIONS] };
}
