/**
 * A stand-in CRI runtime for tests that need ipamd's releases *unfrozen* without a
 * real containerd: a `runtime.v1.RuntimeService` gRPC server (proto/cri/api.proto,
 * loaded with @grpc/proto-loader the way ipamd loads it) on a Unix socket in a temp
 * dir, answering ListPodSandbox and PodSandboxStatus from a map the test keeps in step
 * with its ADDs and DELs. Every other RPC answers UNIMPLEMENTED.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { CRI_PROTO_PATH } from '../../ipamd/restore/cri-source-grpc.js';

/** One READY sandbox the stand-in reports. */
export interface FakeSandbox {
  id: string;
  ip: string;
  name: string;
  namespace: string;
  uid: string;
  /** ms since the epoch. */
  createdAtMs: number;
}

/** A running stand-in. */
export interface FakeCri {
  /** `unix:///...` endpoint for CRI_RUNTIME_ENDPOINT. */
  endpoint: string;
  sandboxes: Map<string, FakeSandbox>;
  /** Adds a READY sandbox named like the test ipamd client names pods (`pod-<id>`, `uid-<id>`). */
  addPod(id: string, ip: string): void;
  removePod(id: string): void;
  close(): Promise<void>;
}

/** Starts the stand-in on a fresh socket. */
export async function startFakeCri(): Promise<FakeCri> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fake-cri-'));
  const socket = path.join(dir, 'cri.sock');
  const def = protoLoader.loadSync(CRI_PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(def) as unknown as { runtime: { v1: { RuntimeService: { service: grpc.ServiceDefinition } } } };
  const sandboxes = new Map<string, FakeSandbox>();
  const meta = (s: FakeSandbox) => ({ name: s.name, uid: s.uid, namespace: s.namespace, attempt: 0 });
  const labels = (s: FakeSandbox) => ({ 'io.kubernetes.pod.name': s.name, 'io.kubernetes.pod.namespace': s.namespace, 'io.kubernetes.pod.uid': s.uid });
  const ns = (ms: number) => `${BigInt(ms) * 1_000_000n}`;
  const server = new grpc.Server();
  const impl: grpc.UntypedServiceImplementation = {};
  for (const m of Object.keys(pkg.runtime.v1.RuntimeService.service)) {
    impl[m] = (_call: unknown, cb: grpc.sendUnaryData<unknown>) => cb({ code: grpc.status.UNIMPLEMENTED, details: `${m} not implemented by the test stand-in` });
  }
  impl.ListPodSandbox = (_call: unknown, cb: grpc.sendUnaryData<unknown>) => {
    cb(null, { items: [...sandboxes.values()].map((s) => ({ id: s.id, metadata: meta(s), state: 'SANDBOX_READY', created_at: ns(s.createdAtMs), labels: labels(s), annotations: {}, runtime_handler: '' })) });
  };
  impl.PodSandboxStatus = (call: grpc.ServerUnaryCall<{ pod_sandbox_id: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
    const s = sandboxes.get(call.request.pod_sandbox_id);
    if (!s) return cb({ code: grpc.status.NOT_FOUND, details: 'no such sandbox' });
    cb(null, {
      status: {
        id: s.id, metadata: meta(s), state: 'SANDBOX_READY', created_at: ns(s.createdAtMs), network: { ip: s.ip, additional_ips: [] },
        linux: { namespaces: { options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } }, labels: labels(s), annotations: {}, runtime_handler: '',
      },
      info: {},
    });
  };
  server.addService(pkg.runtime.v1.RuntimeService.service, impl);
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  return {
    endpoint: `unix://${socket}`, sandboxes,
    addPod(id, ip) {
      sandboxes.set(id, { id, ip, name: `pod-${id}`, namespace: 'default', uid: `uid-${id}`, createdAtMs: Date.now() });
    },
    removePod(id) {
      sandboxes.delete(id);
    },
    async close() {
      await new Promise<void>((r) => server.tryShutdown(() => r()));
      server.forceShutdown();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
