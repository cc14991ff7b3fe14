/**
 * A CRI runtime stand-in: a real `runtime.v1.RuntimeService` gRPC server
 * (proto/cri/api.proto, k8s.io/cri-api, loaded with @grpc/proto-loader the way ipamd
 * loads it) on a Unix socket. It answers `ListPodSandbox` and `PodSandboxStatus` from an
 * in-memory set of READY sandboxes the test, demo or bench keeps in step with its pods
 * (added before the CNI ADD, as a runtime creates the sandbox first; removed when the pod
 * stops), and `Version` unless built without an identity. Every other RPC answers
 * UNIMPLEMENTED. ipamd's CriSource talks to it exactly as to containerd, so the evidence
 * pass can read a runtime (releases unfrozen) without running containerd.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { CRI_PROTO_PATH, type VersionResponse } from '../../ipamd/restore/cri-source-grpc.js';

/** One READY sandbox: `id` is the CNI container id; `ip` is set once the ADD answered. */
export interface CriSandbox {
  id: string;
  name: string;
  namespace: string;
  uid: string;
  ip?: string;
  /** Creation time, ms since the epoch. */
  createdAtMs: number;
}

/** Options of {@link startCriStandIn}. */
export interface CriStandInOptions {
  /** Socket file (an existing file there is removed first). Default: `cri.sock` in a fresh temp dir, removed by close(). */
  socketPath?: string;
  /**
   * What `Version` answers; `null` makes it UNIMPLEMENTED (a runtime of unknown identity).
   * Default: `eni-ipam-cri-standin` 0.1.0, CRI v1.
   */
  identity?: VersionResponse | null;
}

type Cb = (err: grpc.ServiceError | null | Partial<grpc.StatusObject>, out?: unknown) => void;
type Call = grpc.ServerUnaryCall<Record<string, unknown>, unknown>;

/** The stand-in's default `Version` answer. */
export const CRI_STANDIN_IDENTITY: VersionResponse = {
  version: '0.1.0',
  runtime_name: 'eni-ipam-cri-standin',
  runtime_version: '0.1.0',
  runtime_api_version: 'v1',
};

let serviceDef: grpc.ServiceDefinition | undefined;
function runtimeService(): grpc.ServiceDefinition {
  if (!serviceDef) {
    const def = protoLoader.loadSync(CRI_PROTO_PATH, {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as {
      runtime: { v1: { RuntimeService: { service: grpc.ServiceDefinition } } };
    };
    serviceDef = pkg.runtime.v1.RuntimeService.service;
  }
  return serviceDef;
}

/** The CRI stand-in. Create with {@link startCriStandIn}. */
export class CriStandIn {
  /** READY sandboxes by id. Mutate through {@link add}, {@link addPod}, {@link setIp}, {@link remove}. */
  readonly sandboxes = new Map<string, CriSandbox>();
  /** Number of ListPodSandbox calls answered (how often ipamd read the runtime). */
  lists = 0;
  /** Number of PodSandboxStatus calls received. */
  statusCalls = 0;
  /**
   * Delay (ms) before a PodSandboxStatus answer is sent. The answer is computed when the
   * request arrives, so a delayed answer is a stale snapshot, as from a slow runtime.
   */
  statusDelayMs = 0;

  constructor(
    readonly socketPath: string,
    private readonly server: grpc.Server,
    private readonly identity: VersionResponse | null,
    private readonly ownDir?: string,
  ) {}

  /** `unix:///...` endpoint for CRI_RUNTIME_ENDPOINT. */
  get endpoint(): string {
    return `unix://${this.socketPath}`;
  }

  /** Adds a READY sandbox for a pod (before its CNI ADD). */
  add(s: Omit<CriSandbox, 'createdAtMs'> & { createdAtMs?: number }): void {
    this.sandboxes.set(s.id, { createdAtMs: Date.now(), ...s });
  }

  /** Adds a READY sandbox named the way the test ipamd client names pods (`pod-<id>`, `default`, `uid-<id>`) with its IP. */
  addPod(id: string, ip: string): void {
    this.add({ id, ip, name: `pod-${id}`, namespace: 'default', uid: `uid-${id}` });
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

  /** Same as {@link remove}. */
  removePod(id: string): void {
    this.remove(id);
  }

  /** Stops the server and removes the socket file (and the temp dir it made). */
  async close(): Promise<void> {
    await new Promise<void>((r) => this.server.tryShutdown(() => r()));
    this.server.forceShutdown();
    await rm(this.socketPath, { force: true });
    if (this.ownDir) await rm(this.ownDir, { recursive: true, force: true });
  }

  /** @internal gRPC handlers: every RuntimeService method, UNIMPLEMENTED unless served. */
  handlers(): grpc.UntypedServiceImplementation {
    const md = (s: CriSandbox) => ({ name: s.name, uid: s.uid, namespace: s.namespace, attempt: 0 });
    const labels = (s: CriSandbox) => ({
      'io.kubernetes.pod.name': s.name,
      'io.kubernetes.pod.namespace': s.namespace,
      'io.kubernetes.pod.uid': s.uid,
    });
    const ns = (s: CriSandbox) => `${BigInt(Math.trunc(s.createdAtMs)) * 1_000_000n}`;
    const impl: grpc.UntypedServiceImplementation = {};
    for (const m of Object.keys(runtimeService())) {
      impl[m] = (_c: Call, cb: Cb) =>
        cb({ code: grpc.status.UNIMPLEMENTED, details: `${m} not served by the CRI stand-in` });
    }
    const identity = this.identity;
    if (identity) impl.Version = (_c: Call, cb: Cb) => cb(null, identity);
    impl.ListPodSandbox = (_c: Call, cb: Cb) => {
      this.lists++;
      cb(null, {
        items: [...this.sandboxes.values()].map((s) => ({
          id: s.id,
          metadata: md(s),
          state: 'SANDBOX_READY',
          created_at: ns(s),
          labels: labels(s),
          annotations: {},
          runtime_handler: '',
        })),
      });
    };
    impl.PodSandboxStatus = (c: Call, rawCb: Cb) => {
      this.statusCalls++;
      const delay = this.statusDelayMs;
      const cb: Cb = delay > 0 ? (err, out) => void setTimeout(() => rawCb(err, out), delay) : rawCb;
      const s = this.sandboxes.get(String(c.request.pod_sandbox_id ?? ''));
      if (!s)
        return cb({ code: grpc.status.NOT_FOUND, details: `sandbox ${String(c.request.pod_sandbox_id)} not found` });
      cb(null, {
        status: {
          id: s.id,
          metadata: md(s),
          state: 'SANDBOX_READY',
          created_at: ns(s),
          network: { ip: s.ip ?? '', additional_ips: [] },
          linux: { namespaces: { options: { network: 'POD', pid: 'CONTAINER', ipc: 'POD' } } },
          labels: labels(s),
          annotations: {},
          runtime_handler: '',
        },
        info: {},
      });
    };
    return impl;
  }
}

/**
 * Starts a stand-in (see {@link CriStandInOptions}).
 * @throws Error when the socket cannot be bound (a temp dir it made is removed first).
 */
export async function startCriStandIn(o: CriStandInOptions = {}): Promise<CriStandIn> {
  const ownDir = o.socketPath ? undefined : await mkdtemp(path.join(os.tmpdir(), 'cri-standin-'));
  const socketPath = o.socketPath ?? path.join(ownDir!, 'cri.sock');
  await rm(socketPath, { force: true });
  const server = new grpc.Server();
  const cri = new CriStandIn(socketPath, server, o.identity === undefined ? CRI_STANDIN_IDENTITY : o.identity, ownDir);
  server.addService(runtimeService(), cri.handlers());
  try {
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(`unix://${socketPath}`, grpc.ServerCredentials.createInsecure(), (e) =>
        e ? reject(e) : resolve(),
      ),
    );
  } catch (e) {
    server.forceShutdown();
    if (ownDir) await rm(ownDir, { recursive: true, force: true });
    throw e;
  }
  return cri;
}
