/**
 * A stand-in for ipamd's `eniipam.v1.CNIBackend` in the test process: `@grpc/grpc-js` +
 * `@grpc/proto-loader` over `proto/ipam.proto` (the way ipamd loads it), on a Unix socket
 * in a fresh temp dir. Hands out IPv4s from `10.0.5.0/24` per allocation key
 * `(network_name, container_id, if_name)` (same key → same IP), records every request,
 * and can be told to fail AddNetwork with a gRPC status. Talking to it through the real
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
} from '../proto/ipam.js';

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
  server.addService(pkg.eniipam.v1.CNIBackend.service, {
    AddNetwork: (
      call: grpc.ServerUnaryCall<AddNetworkRequest, AddNetworkReply>,
      cb: grpc.sendUnaryData<AddNetworkReply>,
    ) => {
      const req = call.request;
      standin.calls.push({ method: 'AddNetwork', request: req });
      if (standin.failAdd)
        return cb({ code: standin.failAdd.code, details: standin.failAdd.details } as grpc.ServiceError);
      const key = keyOf(req);
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
      const ip = standin.allocations.get(key);
      const eni = eniOf.get(key) ?? { device_number: 0, route_table_id: MAIN_ROUTE_TABLE };
      standin.allocations.delete(key);
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
