/**
 * The gRPC replies of a node serving IPv6 (`ipv6` or `dual` mode; docs/design.md#ip-families)
 * and the family check every ADD goes through: `AddNetworkRequest.ip_family` must be the
 * mode served or `auto`; an empty one is a plugin from before IPv6 and is served only in
 * `ipv4` mode. A refused family is answered `success: false` with `ip_family` naming the
 * mode (the plugin turns it into CNI error 7 naming both), nothing assigned.
 */
import {
  MAIN_ROUTE_TABLE,
  type AddNetworkReply,
  type AddNetworkRequest,
  type CheckNetworkReply,
  type DelNetworkReply,
  type GcNetworkReply,
  type IpFamilyMode,
} from '../../proto/ipam.js';
import type { FamilyAddResult, FamilyDelResult, FamilyService } from '../service/family-service.js';

/**
 * The refusal of `req` on a node serving `mode`, or undefined when the family is served.
 * `base` fills the reply's fixed fields.
 */
export function refuseFamily(
  req: AddNetworkRequest,
  mode: IpFamilyMode,
  base: Pick<AddNetworkReply, 'vpc_v4_cidrs' | 'use_external_snat'>,
): AddNetworkReply | undefined {
  const asked = req.ip_family ?? '';
  if (asked === 'auto' || asked === mode || (asked === '' && mode === 'ipv4')) return undefined;
  const what = asked === '' ? 'a plugin that asks for IPv4 only (no ip_family)' : `ipFamily ${asked}`;
  return {
    success: false,
    ipv4_addr: '',
    ipv6_addr: '',
    device_number: 0,
    route_table_id: 0,
    eni_id: '',
    ...base,
    ip_family: mode,
    message: `this node serves ${mode} (ENABLE_IPv6/ENABLE_IPv4), not ${what}`,
  };
}

/** The AddNetworkReply of a family-aware ADD. */
export function addReply(
  r: FamilyAddResult,
  mode: IpFamilyMode,
  base: Pick<AddNetworkReply, 'vpc_v4_cidrs' | 'use_external_snat'>,
  primaryEniId: string,
): AddNetworkReply {
  return {
    success: true,
    ipv4_addr: r.v4?.allocation.ipv4 ?? '',
    ipv6_addr: r.v6.ipv6,
    ipv6_prefix_len: 128,
    egress_v4_addr: r.v6.egressV4,
    device_number: r.v4?.eni.deviceNumber ?? 0,
    route_table_id: r.v4?.routeTableId ?? MAIN_ROUTE_TABLE,
    eni_id: r.v4?.eni.eniId ?? primaryEniId,
    ...base,
    ip_family: mode,
    message: r.existing ? 'already assigned' : '',
  };
}

/** The DelNetworkReply of a family-aware DEL. */
export function delReply(r: FamilyDelResult): DelNetworkReply {
  return {
    success: true,
    released: r.released,
    ipv4_addr: r.v4?.allocation?.ipv4 ?? '',
    ipv6_addr: r.v6?.ipv6 ?? '',
    egress_v4_addr: r.v6?.egressV4 ?? '',
    device_number: r.v4?.eni?.deviceNumber ?? 0,
    route_table_id: r.v4?.routeTableId ?? MAIN_ROUTE_TABLE,
    message: r.released ? '' : 'no address held by this container',
  };
}

/** The CheckNetworkReply of a family-aware CHECK. */
export function checkReply(
  f: FamilyService,
  key: { networkName: string; containerID: string; ifName: string },
  primaryEniId: string,
): CheckNetworkReply {
  const r = f.lookup(key);
  if (!r) return { held: false, ipv4_addr: '', device_number: 0, route_table_id: 0, eni_id: '', ip_family: f.mode };
  return {
    held: true,
    ipv4_addr: r.v4?.allocation.ipv4 ?? '',
    ipv6_addr: r.v6.ipv6,
    egress_v4_addr: r.v6.egressV4,
    device_number: r.v4?.eni?.deviceNumber ?? 0,
    route_table_id: r.v4?.routeTableId ?? MAIN_ROUTE_TABLE,
    eni_id: r.v4?.allocation.eniId ?? primaryEniId,
    ip_family: f.mode,
  };
}

/** The GcNetworkReply of a GC (family-aware, or IPv4 only with no `v6`), each attachment with its pod when known. */
export function gcReply(r: Awaited<ReturnType<FamilyService['gc']>>): GcNetworkReply {
  return {
    released: r.map((x) => ({
      container_id: x.key.containerID,
      if_name: x.key.ifName,
      ipv4_addr: x.ipv4,
      route_table_id: x.routeTableId,
      ipv6_addr: x.v6?.ipv6 ?? '',
      egress_v4_addr: x.v6?.egressV4 ?? '',
      k8s_pod_name: x.pod?.name ?? '',
      k8s_pod_namespace: x.pod?.namespace ?? '',
    })),
    message: `${r.length} released`,
  };
}
