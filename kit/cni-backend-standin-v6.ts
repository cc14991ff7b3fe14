/**
 * The IPv6 / dual-stack half of the ipamd stand-in (cni-backend-standin.ts), playing the
 * contract of proto/ipam.proto's IP-family fields the way ipamd's IPv6 mode must: one key
 * holds all its addresses (dual: an IPv4 and an IPv6; ipv6: an IPv6 and an egress IPv4),
 * assigned, checked, released and garbage-collected together; a request for a family the
 * node does not serve gets `success: false` with `ip_family` naming the mode. Also serves
 * CheckNetwork, GcNetwork and IpamStatus for every mode.
 */
import type * as grpc from '@grpc/grpc-js';
import {
  MAIN_ROUTE_TABLE,
  type AddNetworkReply,
  type AddNetworkRequest,
  type CheckNetworkReply,
  type CheckNetworkRequest,
  type DelNetworkReply,
  type GcNetworkReply,
  type GcNetworkRequest,
  type IpamStatusReply,
  type IpFamilyMode,
} from '../proto/ipam.js';

/** What one key holds in `ipv6`/`dual` mode. */
export interface V6Allocation {
  ipv4: string;
  ipv6: string;
  egressV4: string;
}

/** The node's /80 the stand-in hands /128s from. */
export const STANDIN_V6_PREFIX = '2600:1f14:aa:bb00::';

interface StandinState {
  ipFamily: IpFamilyMode;
  allocations: Map<string, string>;
  v6: Map<string, V6Allocation>;
  pods: Map<string, { namespace: string; name: string }>;
}
type Key = (r: { network_name: string; container_id: string; if_name: string }) => string;
type Unary<Q, R> = (call: grpc.ServerUnaryCall<Q, R>, cb: grpc.sendUnaryData<R>) => void;

/** AddNetwork/DelNetwork logic for `ipv6`/`dual`, plus Check/Gc/Status handlers for every mode. */
export function familyServices(s: StandinState, keyOf: Key) {
  let next = 10;
  const v4Of = (key: string) => s.allocations.get(key) ?? '';
  const held = (key: string): V6Allocation | undefined =>
    s.ipFamily === 'ipv4' ? (v4Of(key) ? { ipv4: v4Of(key), ipv6: '', egressV4: '' } : undefined) : s.v6.get(key);
  const empty = { device_number: 0, route_table_id: MAIN_ROUTE_TABLE, vpc_v4_cidrs: ['10.0.0.0/16'] };
  return {
    add(req: AddNetworkRequest, key: string): AddNetworkReply {
      const base = { ...empty, use_external_snat: false, eni_id: 'eni-0123456789abcdef0', ip_family: s.ipFamily };
      const asked = req.ip_family || 'ipv4';
      if (asked !== 'auto' && asked !== s.ipFamily)
        return { ...base, success: false, ipv4_addr: '', ipv6_addr: '', message: `node serves ${s.ipFamily}` };
      let a = s.v6.get(key);
      if (!a) {
        const n = next++;
        a = {
          ipv4: s.ipFamily === 'dual' ? `10.0.5.${n}` : '',
          ipv6: `${STANDIN_V6_PREFIX}${n.toString(16)}`,
          egressV4: s.ipFamily === 'ipv6' ? `169.254.172.${n}` : '',
        };
        s.v6.set(key, a);
        if (a.ipv4) s.allocations.set(key, a.ipv4);
      }
      return {
        ...base,
        success: true,
        ipv4_addr: a.ipv4,
        ipv6_addr: a.ipv6,
        ipv6_prefix_len: 128,
        egress_v4_addr: a.egressV4,
        message: '',
      };
    },
    del(key: string): DelNetworkReply {
      const a = s.v6.get(key);
      s.v6.delete(key);
      s.allocations.delete(key);
      return {
        success: true,
        released: a !== undefined,
        ipv4_addr: a?.ipv4 ?? '',
        ipv6_addr: a?.ipv6 ?? '',
        egress_v4_addr: a?.egressV4 ?? '',
        device_number: 0,
        route_table_id: MAIN_ROUTE_TABLE,
        message: '',
      };
    },
    handlers: {
      CheckNetwork: ((call, cb) => {
        const a = held(keyOf(call.request));
        cb(null, {
          held: a !== undefined,
          ipv4_addr: a?.ipv4 ?? '',
          ipv6_addr: a?.ipv6 ?? '',
          egress_v4_addr: a?.egressV4 ?? '',
          device_number: 0,
          route_table_id: MAIN_ROUTE_TABLE,
          eni_id: 'eni-0123456789abcdef0',
          ip_family: s.ipFamily,
        });
      }) as Unary<CheckNetworkRequest, CheckNetworkReply>,
      GcNetwork: ((call, cb) => {
        const req = call.request;
        const valid = new Set(req.valid_attachments.map((v) => `${req.network_name}/${v.container_id}/${v.if_name}`));
        const keys = new Set([...s.allocations.keys(), ...s.v6.keys()]);
        const released = [...keys]
          .filter((k) => k.startsWith(`${req.network_name}/`) && !valid.has(k))
          .map((k) => {
            const [, container_id, if_name] = k.split('/') as [string, string, string];
            const a = held(k)!;
            const pod = s.pods.get(k);
            s.v6.delete(k);
            s.allocations.delete(k);
            s.pods.delete(k);
            return {
              k8s_pod_name: pod?.name ?? '',
              k8s_pod_namespace: pod?.namespace ?? '',
              container_id,
              if_name,
              ipv4_addr: a.ipv4,
              ipv6_addr: a.ipv6,
              egress_v4_addr: a.egressV4,
              route_table_id: MAIN_ROUTE_TABLE,
            };
          });
        cb(null, { released, message: '' });
      }) as Unary<GcNetworkRequest, GcNetworkReply>,
      IpamStatus: ((_call, cb) => {
        cb(null, { can_serve: true, code: 0, message: '', ip_family: s.ipFamily });
      }) as Unary<unknown, IpamStatusReply>,
    },
  };
}
