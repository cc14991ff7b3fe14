/**
 * A CRI `runtime.v1.RuntimeService` stand-in on a Unix socket (proto/cri/api.proto,
 * k8s.io/cri-api): it answers `Version`, `ListPodSandbox` and `PodSandboxStatus` from an
 * in-memory set of READY sandboxes that the test or bench keeps in step with its pods
 * (added before the CNI ADD, as a runtime creates the sandbox first; removed when the
 * pod is stopped). It lets ipamd's evidence pass read a runtime, so releases are not
 * frozen, without running containerd. It is a real gRPC server: ipamd's CriSource talks
 * to it exactly as to containerd.
 */
import { rm } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { CRI_PROTO_PATH } from '../../ipamd/restore/cri-source-grpc.js';

/** One READY sandbox: `id` is the CNI container id; `ip` is set once the ADD answered. */
export interface StandinSandbox {
  id: string;
  name: string;
  namespace: string;
  uid: string;
  ip?: string;
  /** Creation time, ms since epoch. */
  createdAtMs: number;
}

type Cb = (err: grpc.ServiceError | null | Partial<grpc.StatusObject>, out?: unknown) => void;
type Call = grpc.ServerUnaryCall<Record<string, unknown>, unknown>;

let serviceDef: grpc.ServiceDefinition | undefined;
function runtimeService(): grpc.ServiceDefinition {
  if (!serviceDef) {
    const def = protoLoader.loadSync(CRI_PROTO_PATH, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { runtime: { v1: { RuntimeService: { service: grpc.ServiceDefinition } } } };
    serviceDef = pkg.runtime.v1.RuntimeService.service;
  }
  return serviceDef;
}

/** The CRI stand-in. Create with {@link startCriStandin}. */
export class CriStandin {
  /** READY sandboxes by id. Mutate through {@link add}, {@link setIp}, {@link remove}. */
  readonly sandboxes = new Map<string, StandinSandbox>();
  /** Number of ListPodSandbox calls answered (how often ipamd read the runtime). */
  lists = 0;
  /** Number of PodSandboxStatus calls received. */
  statusCalls = 0;
  /**
   * Delay (ms) before a PodSandboxStatus answer is sent. The answer is computed when the
   * request arrives, so a delayed answer is a stale snapshot, as from a slow runtime.
   */
  statusDelayMs = 0;

  constructor(readonly socketPath: string, private readonly server: grpc.Server) {}

  /** Adds a READY sandbox for a pod (before its CNI ADD). */
  add(s: Omit<StandinSandbox, 'createdAtMs'> & { createdAtMs?: number }): void {
    this.sandboxes.set(s.id, { createdAtMs: Date.now(), ...s });
  }

  /** Records the pod IP the ADD returned (PodSandboxStatus then reports it). */
  setIp(id: string, ip: string): void {
    const s = this.sandboxes.get(id);
    if (s) s.ip = ip;
  }

  /** Removes a sandbox (pod stopped). */
  remove(id: string): void {
    this.sandboxes.delete(id);
  }

  /** Stops the server and removes the socket file. */
  async close(): Promise<void> {
    await new Promise<void>((r) => this.server.tryShutdown(() => r()));
    await rm(this.socketPath, { force: true });
  }

  /** @internal gRPC handlers. */
  handlers(): grpc.UntypedServiceImplementation {
    const md = (s: StandinSandbox) => ({ name: s.name, uid: s.uid, namespace: s.namespace, attempt: 0 });
    const labels = (s: StandinSandbox) => ({ 'io.kubernetes.pod.name': s.name, 'io.kubernetes.pod.namespace': s.namespace, 'io.kubernetes.pod.uid': s.uid });
    const ns = (s: StandinSandbox) => `${s.createdAtMs}000000`;
    const unimplemented = (_c: Call, cb: Cb) => cb({ code: grpc.status.UNIMPLEMENTED, details: 'not served by the CRI stand-in' });
    return {
      Version: (_c: Call, cb: Cb) => cb(null, { version: '0.1.0', runtime_name: 'eni-ipam-cri-standin', runtime_version: '0.1.0', runtime_api_version: 'v1' }),
      ListPodSandbox: (_c: Call, cb: Cb) => {
        this.lists++;
        cb(null, { items: [...this.sandboxes.values()].map((s) => ({ id: s.id, metadata: md(s), state: 'SANDBOX_READY', created_at: ns(s), labels: labels(s), annotations: {}, runtime_handler: '' })) });
      },
      PodSandboxStatus: (c: Call, rawCb: Cb) => {
        this.statusCalls++;
        const delay = this.statusDelayMs;
        const cb: Cb = delay > 0 ? (err, out) => void setTimeout(() => rawCb(err, out), delay) : rawCb;
        const s = this.sandboxes.get(String(c.request.pod_sandbox_id ?? ''));
        if (!s) return cb({ code: grpc.status.NOT_FOUND, details: `sandbox ${String(c.request.pod_sandbox_id)} not found` });
        cb(null, {
          status: {
            id: s.id, metadata: md(s), state: 'SANDBOX_READY', created_at: ns(s),
            network: { ip: s.ip ?? '', additional_ips: [] }, linux: { namespaces: { options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } },
            labels: labels(s), annotations: {}, runtime_handler: '',
          },
          info: {},
        });
      },
      RunPodSandbox: unimplemented, StopPodSandbox: unimplemented, RemovePodSandbox: unimplemented,
    };
  }
}

/**
 * Starts a stand-in on `socketPath` (an existing file there is removed first).
 * @throws Error when the socket cannot be bound.
 */
export async function startCriStandin(socketPath: string): Promise<CriStandin> {
  await rm(socketPath, { force: true });
  const server = new grpc.Server();
  const cri = new CriStandin(socketPath, server);
  server.addService(runtimeService(), cri.handlers());
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  return cri;
}
