/**
 * Wire compatibility of the plugin's gRPC client (cni-plugin/ipamd-client.ts: node:http2
 * with hand-written gRPC framing + protobufjs/light codecs from the generated
 * descriptor) with a server built the way ipamd builds its own (ipamd/rpc/server.ts:
 * `@grpc/grpc-js` + `@grpc/proto-loader` over proto/ipam.proto, same loader options),
 * on a Unix socket in a temp dir. Every RPC round-trips every field; a non-OK status,
 * a deadline, a missing socket and an unknown method map to IpamdCallError/GrpcCallFailure
 * with the right status codes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import {
  IPAM_PROTO_PATH,
  type AddNetworkReply,
  type AddNetworkRequest,
  type CheckNetworkReply,
  type DelNetworkReply,
  type DelNetworkRequest,
  type GcNetworkReply,
  type GcNetworkRequest,
  type IpamStatusReply,
  type IpamStatusRequest,
} from '../../proto/ipam.js';
import { connectIpamd, IpamdCallError } from '../../cni-plugin/ipamd-client.js';
import { GrpcCallFailure, openUnixChannel } from '../../cni-plugin/grpc-http2.js';
import { GrpcStatus } from '../../proto/grpc-status.js';
import { waitFor } from '../../kit/wait.js';

type Handler = (req: any, call: grpc.ServerUnaryCall<any, any>) => Promise<object> | object; // eslint-disable-line @typescript-eslint/no-explicit-any

interface WireServer {
  socket: string;
  /** Requests as the server decoded them, with the deadline it saw (ms since epoch, or Infinity). */
  seen: { method: string; request: any; deadline: number }[]; // eslint-disable-line @typescript-eslint/no-explicit-any
  handlers: Record<string, Handler>;
  cancelled: string[];
}

/** A proto-loader server (ipamd's loader options) on `<tmp>/ipamd.sock`, removed by t.after. */
async function startWireServer(t: { after(fn: () => unknown): void }): Promise<WireServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-wire-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
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
  const service = pkg.eniipam.v1.CNIBackend.service;
  const ws: WireServer = { socket: path.join(dir, 'ipamd.sock'), seen: [], handlers: {}, cancelled: [] };
  const impl: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(service)) {
    impl[method] = (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      const dl = call.getDeadline();
      ws.seen.push({ method, request: call.request, deadline: dl instanceof Date ? dl.getTime() : Number(dl) });
      call.on('cancelled', () => ws.cancelled.push(method));
      const h = ws.handlers[method];
      if (!h)
        return cb({
          code: grpc.status.UNIMPLEMENTED,
          details: `no handler for ${method} in this test`,
        } as grpc.ServiceError);
      Promise.resolve()
        .then(() => h(call.request, call))
        .then(
          (rep) => cb(null, rep),
          (e: { code?: number; details?: string; message?: string }) => {
            cb({ code: e.code ?? grpc.status.INTERNAL, details: e.details ?? e.message ?? '' } as grpc.ServiceError);
          },
        );
    };
  }
  const server = new grpc.Server();
  server.addService(service, impl);
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${ws.socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });
  t.after(() => server.forceShutdown());
  return ws;
}

const ids = (id: string) => ({
  api_version: 1,
  client_version: '0.1.0-wire',
  container_id: id,
  if_name: 'eth0',
  network_name: 'aws-cni',
  netns: `/var/run/netns/cni-${id}`,
  k8s_pod_name: 'pod-é',
  k8s_pod_namespace: 'default',
  k8s_pod_infra_container_id: id,
  k8s_pod_uid: '6d4e1c1a-0b7e-4f55-9a3b-1f2d3c4b5a69',
});

test('every RPC round-trips every field against a grpc-js + proto-loader server', async (t) => {
  const ws = await startWireServer(t);
  const addReply: AddNetworkReply = {
    success: true,
    ipv4_addr: '10.0.0.57',
    ipv6_addr: '2600:1f14:abc:de00:0:1::7',
    device_number: 2,
    route_table_id: 4294967295,
    vpc_v4_cidrs: ['10.0.0.0/16', '100.64.0.0/10'],
    use_external_snat: true,
    eni_id: 'eni-0123456789abcdef0',
    message: 'already assigned',
    ip_family: 'dual',
    ipv6_prefix_len: 128,
    egress_v4_addr: '169.254.172.9',
  };
  const delReply: DelNetworkReply = {
    success: true,
    released: true,
    ipv4_addr: '10.0.0.57',
    device_number: 2,
    route_table_id: 3,
    message: '',
    ipv6_addr: '2600:1f14:abc:de00:0:1::7',
    egress_v4_addr: '169.254.172.9',
  };
  const statusReply: IpamStatusReply = {
    can_serve: false,
    code: 51,
    message: 'pool empty: subnet has no free address',
    ip_family: 'ipv6',
  };
  const gcReply: GcNetworkReply = {
    released: [
      {
        container_id: 'dead1',
        if_name: 'eth0',
        ipv4_addr: '10.0.0.9',
        route_table_id: 254,
        ipv6_addr: '2600:1f14:abc:de00:0:1::9',
        egress_v4_addr: '169.254.172.10',
        k8s_pod_name: 'web-0',
        k8s_pod_namespace: 'default',
      },
      {
        container_id: 'dead2',
        if_name: 'net1',
        ipv4_addr: '10.0.0.10',
        route_table_id: 0,
        ipv6_addr: '',
        egress_v4_addr: '',
        k8s_pod_name: '',
        k8s_pod_namespace: '',
      },
    ],
    message: '2 released',
  };
  const checkReply: CheckNetworkReply = {
    held: true,
    ipv4_addr: '10.0.0.57',
    device_number: 1,
    route_table_id: 2,
    eni_id: 'eni-0aa',
    ipv6_addr: '2600:1f14:abc:de00:0:1::7',
    egress_v4_addr: '',
    ip_family: 'dual',
  };
  ws.handlers = {
    AddNetwork: () => addReply,
    DelNetwork: () => delReply,
    IpamStatus: () => statusReply,
    GcNetwork: () => gcReply,
    CheckNetwork: () => checkReply,
  };

  const c = connectIpamd(ws.socket);
  try {
    const addReq: AddNetworkRequest = { ...ids('c1'), ip_family: 'dual' };
    const delReq: DelNetworkRequest = { ...ids('c1'), reason: 'cni-del' };
    const statusReq: IpamStatusRequest = { api_version: 1, client_version: '0.1.0-wire', network_name: 'aws-cni' };
    const gcReq: GcNetworkRequest = {
      api_version: 1,
      client_version: '0.1.0-wire',
      network_name: 'aws-cni',
      valid_attachments: [
        { container_id: 'live1', if_name: 'eth0' },
        { container_id: 'live2', if_name: 'eth1' },
      ],
    };
    assert.deepEqual(await c.addNetwork(addReq, 5000), addReply);
    assert.deepEqual(await c.delNetwork(delReq, 5000), delReply);
    assert.deepEqual(await c.ipamStatus(statusReq, 5000), statusReply);
    assert.deepEqual(await c.gcNetwork(gcReq, 5000), gcReply);
    assert.deepEqual(await c.checkNetwork(ids('c1'), 5000), checkReply);
    assert.deepEqual(
      ws.seen.map((s) => s.method),
      ['AddNetwork', 'DelNetwork', 'IpamStatus', 'GcNetwork', 'CheckNetwork'],
    );
    assert.deepEqual(ws.seen[0]!.request, addReq);
    assert.deepEqual(ws.seen[1]!.request, delReq);
    assert.deepEqual(ws.seen[2]!.request, statusReq);
    assert.deepEqual(ws.seen[3]!.request, gcReq);
    assert.deepEqual(ws.seen[4]!.request, ids('c1'));
    // The grpc-timeout header reached the server as a deadline close to the client's.
    for (const s of ws.seen)
      assert.ok(
        Number.isFinite(s.deadline) && s.deadline > Date.now() && s.deadline < Date.now() + 6000,
        `${s.method} deadline ${s.deadline}`,
      );
  } finally {
    c.close();
  }
});

test('default-valued replies decode with proto3 defaults; calls share one channel concurrently', async (t) => {
  const ws = await startWireServer(t);
  ws.handlers = {
    AddNetwork: () => ({}),
    GcNetwork: () => ({}),
    DelNetwork: async (req: DelNetworkRequest) => {
      // Not a wait: a slow handler, so the concurrent calls overlap on the one channel.
      await new Promise((r) => setTimeout(r, 20));
      return { success: true, released: false, ipv4_addr: req.container_id };
    },
  };
  const c = connectIpamd(ws.socket);
  try {
    assert.deepEqual(await c.addNetwork(ids('x'), 5000), {
      success: false,
      ipv4_addr: '',
      ipv6_addr: '',
      device_number: 0,
      route_table_id: 0,
      vpc_v4_cidrs: [],
      use_external_snat: false,
      eni_id: '',
      message: '',
      ip_family: '',
      ipv6_prefix_len: 0,
      egress_v4_addr: '',
    });
    assert.deepEqual(
      await c.gcNetwork({ api_version: 1, client_version: '', network_name: 'n', valid_attachments: [] }, 5000),
      { released: [], message: '' },
    );
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => c.delNetwork({ ...ids(`k${i}`), reason: 'test' }, 5000)),
    );
    assert.deepEqual(
      replies.map((r) => r.ipv4_addr),
      Array.from({ length: 20 }, (_, i) => `k${i}`),
    );
  } finally {
    c.close();
  }
});

test('a non-OK status from the server becomes IpamdCallError with the same code and details', async (t) => {
  const ws = await startWireServer(t);
  const details = 'api_version 7 not spoken (want 1): 100% "skew", ü; next=line';
  ws.handlers = {
    AddNetwork: () => {
      throw { code: grpc.status.FAILED_PRECONDITION, details };
    },
    DelNetwork: () => {
      throw { code: grpc.status.RESOURCE_EXHAUSTED, details: 'no IP' };
    },
    IpamStatus: () => {
      throw new Error('boom');
    },
  };
  const c = connectIpamd(ws.socket);
  try {
    await assert.rejects(c.addNetwork(ids('e1'), 5000), (e: unknown) => {
      assert.ok(e instanceof IpamdCallError);
      assert.equal(e.status, GrpcStatus.FAILED_PRECONDITION);
      assert.equal(e.statusName, 'FAILED_PRECONDITION');
      assert.equal(e.details, details);
      assert.equal(e.method, 'AddNetwork');
      assert.equal(e.message, `ipamd AddNetwork failed: FAILED_PRECONDITION: ${details}`);
      return true;
    });
    await assert.rejects(
      c.delNetwork({ ...ids('e1'), reason: 'x' }, 5000),
      (e: unknown) =>
        e instanceof IpamdCallError && e.status === GrpcStatus.RESOURCE_EXHAUSTED && e.details === 'no IP',
    );
    await assert.rejects(
      c.ipamStatus({ api_version: 1, client_version: '', network_name: 'n' }, 5000),
      (e: unknown) => e instanceof IpamdCallError && e.status === GrpcStatus.INTERNAL && e.details === 'boom',
    );
    // CheckNetwork has no handler here: the server's UNIMPLEMENTED comes back as is.
    await assert.rejects(
      c.checkNetwork(ids('e1'), 5000),
      (e: unknown) => e instanceof IpamdCallError && e.status === GrpcStatus.UNIMPLEMENTED,
    );
  } finally {
    c.close();
  }
});

test('a slow server hits the deadline: DEADLINE_EXCEEDED on time, and the server sees the call cancelled', async (t) => {
  const ws = await startWireServer(t);
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  t.after(() => release());
  ws.handlers = {
    AddNetwork: async () => {
      await held;
      return { success: true };
    },
  };
  const c = connectIpamd(ws.socket);
  try {
    const t0 = Date.now();
    await assert.rejects(
      c.addNetwork(ids('slow'), 300),
      (e: unknown) =>
        e instanceof IpamdCallError &&
        e.status === GrpcStatus.DEADLINE_EXCEEDED &&
        e.statusName === 'DEADLINE_EXCEEDED',
    );
    const took = Date.now() - t0;
    assert.ok(took >= 290 && took < 2000, `deadline took ${took} ms`);
    await waitFor('the server to see the call end', () => ws.cancelled.includes('AddNetwork'), 3000, 20).catch(
      () => undefined, // asserted below
    );
    assert.ok(
      ws.cancelled.includes('AddNetwork'),
      'the server saw the call end (cancelled by the client or by its own deadline)',
    );
  } finally {
    c.close();
  }
});

test('nothing listening: UNAVAILABLE fast (missing socket, and a closed channel)', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-wire-none-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const c = connectIpamd(path.join(dir, 'absent.sock'));
  const t0 = Date.now();
  await assert.rejects(c.addNetwork(ids('u'), 5000), (e: unknown) => {
    assert.ok(e instanceof IpamdCallError);
    assert.equal(e.status, GrpcStatus.UNAVAILABLE);
    assert.match(e.details, /ENOENT/);
    return true;
  });
  assert.ok(Date.now() - t0 < 2000, 'fails fast, no wait-for-ready');
  c.close();
  await assert.rejects(
    c.delNetwork({ ...ids('u'), reason: 'x' }, 5000),
    (e: unknown) => e instanceof IpamdCallError && e.status === GrpcStatus.UNAVAILABLE,
  );
});

test('raw channel: an unknown method is UNIMPLEMENTED (trailers-only response)', async (t) => {
  const ws = await startWireServer(t);
  const ch = openUnixChannel(ws.socket);
  try {
    await assert.rejects(
      ch.unary('/eniipam.v1.CNIBackend/NoSuchMethod', new Uint8Array(0), 5000),
      (e: unknown) => e instanceof GrpcCallFailure && e.code === GrpcStatus.UNIMPLEMENTED,
    );
  } finally {
    ch.close();
  }
});
