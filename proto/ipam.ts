/**
 * Shared, dependency-free types and constants of the plugin↔ipamd contract
 * (`proto/ipam.proto`). Both the CNI plugin and ipamd import this file; neither
 * imports the other's internals.
 */
import { fileURLToPath } from 'node:url';

/** API version spoken by this build; a mismatch is refused with FAILED_PRECONDITION. */
export const IPAM_API_VERSION = 1;

/** Fully qualified gRPC service name, as in `proto/ipam.proto`. */
export const CNI_BACKEND_SERVICE = 'eniipam.v1.CNIBackend';

/** Default Unix socket ipamd serves on (docs/design.md#3-contracts). */
export const DEFAULT_IPAMD_SOCKET = '/var/run/eni-ipam/ipamd.sock';

/** Absolute path of `proto/ipam.proto` in the source tree (resolved from `dist/proto/`). */
export const IPAM_PROTO_PATH = fileURLToPath(new URL('../../proto/ipam.proto', import.meta.url));

/** Route table id of the main table, used for pods on the primary ENI. */
export const MAIN_ROUTE_TABLE = 254;

/**
 * `DelNetworkRequest.reason` of an ADD the plugin refused because the node already routes
 * the assigned IP to another pod: ipamd releases the key and quarantines the IP.
 */
export const DEL_REASON_IP_CONFLICT = 'ip-conflict';

/**
 * The IP family mode ipamd serves (`ip_family` of the replies; docs/design.md#ip-families):
 * `ipv4` the warm pool; `ipv6` a /128 per pod from the node's /80 plus an IPv4 egress
 * address for v4if0; `dual` an IPv4 and an IPv6 on eth0, held and released together.
 * An empty `ip_family` in a reply (an ipamd before IPv6) means `ipv4`.
 */
export type IpFamilyMode = 'ipv4' | 'ipv6' | 'dual';

/** Every {@link IpFamilyMode}, in the order the docs list them. */
export const IP_FAMILY_MODES: readonly IpFamilyMode[] = ['ipv4', 'ipv6', 'dual'];

/**
 * `AddNetworkRequest.ip_family`: a mode the config asks for, or `auto` (whatever the
 * node serves). An empty value is an older plugin that can wire IPv4 only.
 */
export type RequestedIpFamily = IpFamilyMode | 'auto';

/** The mode a reply's `ip_family` names ('' or absent → `ipv4`); undefined for a value this build does not know. */
export function servedFamily(v: string | undefined): IpFamilyMode | undefined {
  if (!v) return 'ipv4';
  return (IP_FAMILY_MODES as readonly string[]).includes(v) ? (v as IpFamilyMode) : undefined;
}

/** IPv4 egress range of IPv6 pods (v4if0 addresses, SNATed to the node's primary IPv4), as upstream. */
export const EGRESS_V4_RANGE = '169.254.172.0/22';

/** Fields identifying one attachment, common to ADD and DEL (field names as in the .proto). */
export interface NetworkRequestIds {
  api_version: number;
  client_version: string;
  container_id: string;
  if_name: string;
  network_name: string;
  netns: string;
  k8s_pod_name: string;
  k8s_pod_namespace: string;
  k8s_pod_infra_container_id: string;
  k8s_pod_uid: string;
}

/** `AddNetworkRequest`. */
export interface AddNetworkRequest extends NetworkRequestIds {
  /** The family the config asks for ({@link RequestedIpFamily}); absent/'' = an IPv4-only plugin. */
  ip_family?: string;
}

/** `AddNetworkReply`. */
export interface AddNetworkReply {
  success: boolean;
  ipv4_addr: string;
  ipv6_addr: string;
  device_number: number;
  route_table_id: number;
  vpc_v4_cidrs: string[];
  use_external_snat: boolean;
  eni_id: string;
  message: string;
  /** The mode ipamd serves ({@link IpFamilyMode}); absent/'' = `ipv4`. */
  ip_family?: string;
  /** Prefix length of `ipv6_addr` on the pod (128; 0/absent = 128). */
  ipv6_prefix_len?: number;
  /** `ipv6` mode: the pod's IPv4 egress address (v4if0) from {@link EGRESS_V4_RANGE}; '' = none. */
  egress_v4_addr?: string;
}

/** `DelNetworkRequest`. */
export interface DelNetworkRequest extends NetworkRequestIds {
  reason: string;
}

/** `DelNetworkReply`. */
export interface DelNetworkReply {
  success: boolean;
  released: boolean;
  ipv4_addr: string;
  device_number: number;
  route_table_id: number;
  message: string;
  /** The IPv6 address released with it (`ipv6`/`dual`); absent/'' = none. */
  ipv6_addr?: string;
  /** The IPv4 egress address released with it (`ipv6`); absent/'' = none. */
  egress_v4_addr?: string;
}

/** `IpamStatusRequest` (CNI STATUS). */
export interface IpamStatusRequest {
  api_version: number;
  client_version: string;
  network_name: string;
}

/**
 * `IpamStatusReply.code` values: the CNI 1.1.0 STATUS error codes ipamd reports
 * (SPEC.md "STATUS": 50 "the plugin is not available (i.e. cannot service ADD
 * requests)", 51 "the plugin is not available, and existing containers in the network
 * may have limited connectivity").
 */
export const IpamStatusCode = {
  /** An address can be had now. */
  Ok: 0,
  /** No ADD can be served now (not ready, shutting down, pool empty and cannot grow); existing pods are unaffected. */
  NotAvailable: 50,
  /** As 50, and existing pods may have limited connectivity. ipamd knows no such condition yet; the plugin passes it through. */
  LimitedConnectivity: 51,
} as const;

/** `IpamStatusReply`. */
export interface IpamStatusReply {
  can_serve: boolean;
  code: number;
  message: string;
  /** The mode ipamd serves ({@link IpFamilyMode}); absent/'' = `ipv4`. */
  ip_family?: string;
}

/** `ValidAttachment`: one entry of CNI GC's `cni.dev/valid-attachments`. */
export interface ValidAttachment {
  container_id: string;
  if_name: string;
}

/** `GcNetworkRequest`. */
export interface GcNetworkRequest {
  api_version: number;
  client_version: string;
  network_name: string;
  valid_attachments: ValidAttachment[];
}

/** `ReleasedAttachment`: one allocation GC released. */
export interface ReleasedAttachment {
  container_id: string;
  if_name: string;
  ipv4_addr: string;
  route_table_id: number;
  /** The IPv6 address released with it; absent/'' = none. */
  ipv6_addr?: string;
  /** The IPv4 egress address released with it; absent/'' = none. */
  egress_v4_addr?: string;
  /** Its pod's name, when ipamd knew it (the host veth is named after the pod); absent/'' = unknown. */
  k8s_pod_name?: string;
  /** Its pod's namespace, as `k8s_pod_name`. */
  k8s_pod_namespace?: string;
}

/** `GcNetworkReply`. */
export interface GcNetworkReply {
  released: ReleasedAttachment[];
  message: string;
}

/** `CheckNetworkRequest` (CNI CHECK): the same identifying fields as ADD. */
export type CheckNetworkRequest = NetworkRequestIds;

/** `CheckNetworkReply`. */
export interface CheckNetworkReply {
  held: boolean;
  ipv4_addr: string;
  device_number: number;
  route_table_id: number;
  eni_id: string;
  /** The IPv6 address held (`dual`: with `ipv4_addr`; `ipv6`: alone); absent/'' = none. */
  ipv6_addr?: string;
  /** `ipv6` mode: the IPv4 egress address held; absent/'' = none. */
  egress_v4_addr?: string;
  /** The mode ipamd serves; absent/'' = `ipv4`. */
  ip_family?: string;
}
