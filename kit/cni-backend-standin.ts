/**
 * A stand-in for ipamd's `eniipam.v1.CNIBackend` in the test process: `@grpc/grpc-js` +
 * `@grpc/proto-loader` over `proto/ipam.proto` (the way ipamd loads it), on a Unix socket
 * in a fresh temp dir. Hands out IPv4s from `10.0.5.0/24` per allocation key
 * `(network_name, container_id, if_name)` (same key → same IP), records every request,
 * and can be told to fail AddNetwork with a gRPC status. `ipFamily` makes it serve an
 * IPv6 node (a /128 from `2600:1f14:aa:bb00::/80` per key plus an IPv4 egress address
 * from 169.254.172.0/22) or a dual-stack one (both an IPv4 and an IPv6), answering
 * AddNetwork, DelNetwork, CheckNetwork, GcNetwork and IpamStatus for both families, and
 * refusing a request for another family (success false, `ip_family` naming its mode). Talking to it through the real
 * plugin proves wire compatibility of the plugin's static codecs with the .proto.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  IPAM_PROTO_PATH,
  MAIN_ROUTE_TABLE,
  type AddNetworkReply,
  type AddNetworkRequest,
  type DelNetworkReply,
  type DelNetworkRequest,
  type IpFamilyMode,
} from '../proto/ipam.js';
import { familyServices, type V6Allocation } from './cni-backend-standin-v6.js';

/** One request the stand-in received. */
export type CniBackendCall =
  { method: 'AddNetwork'; request: AddNetworkRequest } | { method: 'DelNetwork'; request: DelNetworkRequest };

/** A running stand-in. */
export interface CniBackendStandIn {
  /** Unix socket path to put in the CNI config's `ipamdSocket`. */
  socket: string;
  /** Every request, in arrival order. */
  calls: CniBackendCall[];
  /** Current allocations: key `network/container/ifname` → IPv4. */
  allocations: Map<string, string>;
  /** When set, AddNetwork fails with this gRPC status (e.g. `grpc.status.UNAVAILABLE`). */
  failAdd?: { code: grpc.status; details: string };
  /**
   * When set, AddNetwork's reply for a new allocation is overridden with these fields
   * (e.g. `{ ipv4_addr, device_number, route_table_id }` of a secondary ENI); the IP it
   * gives is the one recorded in {@link allocations}.
   */
  addReply?: (req: AddNetworkRequest) => Partial<AddNetworkReply> | undefined;
  /** The mode served (default `ipv4`); set before the first ADD. */
  ipFamily: IpFamilyMode;
  /** IPv6 and egress addresses per allocation key (`ipv6`, `dual`). */
  v6: Map<string, V6Allocation>;
  /** The pod of each allocation key, from AddNetwork's `k8s_pod_*` (GcNetwork names it, as ipamd does). */
  pods: Map<string, { namespace: string; name: string }>;
  /** Stops serving (connections refused afterwards); idempotent. */
  stop(): Promise<void>;
  /** {@link stop} and remove the temp dir; idempotent. */
  close(): Promise<void>;
}

const keyOf = (r: { network_name: string; container_id: string; if_name: string }) =>
  `${r.network_name}/${r.container_id}/${r.if_name}`;

/** Starts the stand-in on `<tmp>/ipamd.sock`. @throws Error if the socket cannot be bound. */
export async function startCniBackendStandIn(): Promise<CniBackendStandIn> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-backend-standin-'));
  const def = protoLoader.loadSync(IPAM_PROTO_PATH, {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    eniipam: { v1: { CNIBackend: { service: grpc.ServiceDefinition } } };
  };
  const server = new grpc.Server();
  let next = 10;
  /** ENI facts given by `addReply`, per allocation key, echoed in DelNetwork's reply. */
  const eniOf = new Map<string, { device_number: number; route_table_id: number }>();
  let stopped = false;
  const standin: CniBackendStandIn = {
    socket: path.join(dir, 'ipamd.sock'),
    calls: [],
    allocations: new Map(),
    ipFamily: 'ipv4',
    v6: new Map(),
    pods: new Map(),
    async stop() {
      if (stopped) return;
      stopped = true;
      server.forceShutdown();
      await rm(standin.socket, { force: true });
    },
    async close() {
      await standin.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  const v6 = familyServices(standin, keyOf);
  server.addService(pkg.eniipam.v1.CNIBackend.service, {
    ...v6.handlers,
    AddNetwork: (
      call: grpc.ServerUnaryCall<AddNetworkRequest, AddNetworkReply>,
      cb: grpc.sendUnaryData<AddNetworkReply>,
    ) => {
      const req = call.request;
      standin.calls.push({ method: 'AddNetwork', request: req });
      if (standin.failAdd)
        return cb({ code: standin.failAdd.code, details: standin.failAdd.details } as grpc.ServiceError);
      const key = keyOf(req);
      if (req.k8s_pod_name) standin.pods.set(key, { namespace: req.k8s_pod_namespace, name: req.k8s_pod_name });
      if (standin.ipFamily !== 'ipv4') return cb(null, v6.add(req, key));
      let ip = standin.allocations.get(key);
      const extra = standin.addReply?.(req) ?? {};
      if (!ip) standin.allocations.set(key, (ip = extra.ipv4_addr ?? `10.0.5.${next++}`));
      if (extra.route_table_id !== undefined)
        eniOf.set(key, { device_number: extra.device_number ?? 0, route_table_id: extra.route_table_id });
      cb(null, {
        success: true,
        ipv6_addr: '',
        device_number: 0,
        route_table_id: MAIN_ROUTE_TABLE,
        vpc_v4_cidrs: ['10.0.0.0/16'],
        use_external_snat: false,
        eni_id: 'eni-0123456789abcdef0',
        message: '',
        ...extra,
        ipv4_addr: ip,
      });
    },
    DelNetwork: (
      call: grpc.ServerUnaryCall<DelNetworkRequest, DelNetworkReply>,
      cb: grpc.sendUnaryData<DelNetworkReply>,
    ) => {
      const req = call.request;
      standin.calls.push({ method: 'DelNetwork', request: req });
      const key = keyOf(req);
      if (standin.ipFamily !== 'ipv4') return cb(null, v6.del(key));
      const ip = standin.allocations.get(key);
      const eni = eniOf.get(key) ?? { device_number: 0, route_table_id: MAIN_ROUTE_TABLE };
      standin.allocations.delete(key);
      standin.pods.delete(key);
      eniOf.delete(key);
      cb(null, { success: true, released: ip !== undefined, ipv4_addr: ip ?? '', ...eni, message: '' });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${standin.socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });
  return standin;
}
