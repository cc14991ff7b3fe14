/**
 * Encodes the ADD result and the VERSION answer in the version the runtime asked for
 * (CNI spec "Success" result; 0.3.x/0.4.0 carry `"version":"4"` in each IP config, 1.0.0
 * dropped it, 1.1.0 added the optional interface `mtu`).
 */
import { LATEST_VERSION, SUPPORTED_VERSIONS } from './versions.js';

/** Link-local gateway every pod routes through (its neighbour entry points at the host veth). */
export const POD_GATEWAY = '169.254.1.1';

/** What ADD set up, independent of the result version. */
export interface Attachment {
  /** Host end of the veth (in the node's netns). */
  hostVeth: { name: string; mac: string };
  /** Pod end: CNI_IFNAME, its MAC, and the netns path (CNI_NETNS). */
  pod: { ifName: string; mac: string; netns: string };
  /** Pod IPv4 address, dotted quad without a prefix length. */
  ipv4: string;
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
  version?: '4';
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
 * Builds the ADD result: interfaces [host veth, pod interface with `sandbox`], one IP
 * `<ip>/32` with gateway 169.254.1.1 on interface index 1, the default route, empty DNS.
 * `version: "4"` only for 0.3.0/0.3.1/0.4.0; interface `mtu` only for 1.1.0.
 */
export function encodeAddResult(cniVersion: string, a: Attachment): AddResult {
  const legacy = cniVersion.startsWith('0.');
  const withMtu = cniVersion === '1.1.0';
  const host: Iface = { name: a.hostVeth.name, mac: a.hostVeth.mac };
  const pod: Iface = { name: a.pod.ifName, mac: a.pod.mac, sandbox: a.pod.netns };
  if (withMtu) {
    host.mtu = a.mtu;
    pod.mtu = a.mtu;
  }
  const ip: IpConfig = legacy
    ? { version: '4', address: `${a.ipv4}/32`, gateway: POD_GATEWAY, interface: 1 }
    : { address: `${a.ipv4}/32`, gateway: POD_GATEWAY, interface: 1 };
  return { cniVersion, interfaces: [host, pod], ips: [ip], routes: [{ dst: '0.0.0.0/0' }], dns: {} };
}

/** The `VERSION` answer: `{"cniVersion":"1.1.0","supportedVersions":[...]}`. */
export function versionResult(): { cniVersion: string; supportedVersions: string[] } {
  return { cniVersion: LATEST_VERSION, supportedVersions: [...SUPPORTED_VERSIONS] };
}
