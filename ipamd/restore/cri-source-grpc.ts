/**
 * gRPC plumbing for the CRI `runtime.v1.RuntimeService` (proto/cri/api.proto):
 * lazy proto loading, endpoint normalisation, a typed promise wrapper around the
 * unary calls, and the message shapes as decoded by @grpc/proto-loader
 * (`keepCase`, int64 as decimal strings, enums as their names, defaults filled).
 *
 * Used by ipamd's CRI restore source (cri-source.ts) and by the test CRI client.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** Absolute path of `proto/cri/api.proto` in the source tree (resolved from `dist/ipamd/restore/`). */
export const CRI_PROTO_PATH = fileURLToPath(new URL('../../../proto/cri/api.proto', import.meta.url));

/** `PodSandboxState` enum names. */
export type PodSandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
/** `NamespaceMode` enum names. */
export type NamespaceMode = 'POD' | 'CONTAINER' | 'NODE' | 'TARGET';

/** `PodSandboxMetadata`. */
export interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}

/** `PodSandbox` as returned by ListPodSandbox (no IP). `created_at` is ns since the epoch, as a decimal string. */
export interface PodSandbox {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  created_at: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtime_handler: string;
}

/** `PodSandboxStatus` (the `status` field of PodSandboxStatusResponse). */
export interface PodSandboxStatus {
  id: string;
  metadata: PodSandboxMetadata | null;
  state: PodSandboxState;
  created_at: string;
  network: { ip: string; additional_ips: { ip: string }[] } | null;
  linux: {
    namespaces: { options: { network: NamespaceMode; pid: NamespaceMode; ipc: NamespaceMode } | null } | null;
  } | null;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtime_handler: string;
}

/** `PodSandboxStatusResponse`; `info` holds runtime-specific JSON strings when `verbose` was set. */
export interface PodSandboxStatusResponse {
  status: PodSandboxStatus | null;
  info: Record<string, string>;
}

/** `PodSandboxFilter` (all fields ANDed). */
export interface PodSandboxFilter {
  id?: string;
  state?: { state: PodSandboxState };
  label_selector?: Record<string, string>;
}

/** `PodSandboxConfig` (the subset declared in proto/cri/api.proto). */
export interface PodSandboxConfig {
  metadata: PodSandboxMetadata;
  hostname?: string;
  log_directory?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  linux?: {
    cgroup_parent?: string;
    security_context?: {
      namespace_options?: { network?: NamespaceMode; pid?: NamespaceMode; ipc?: NamespaceMode };
      privileged?: boolean;
    };
  };
}

/** `VersionResponse`. */
export interface VersionResponse {
  version: string;
  runtime_name: string;
  runtime_version: string;
  runtime_api_version: string;
}

/** Request/response pairs of the RuntimeService RPCs declared in proto/cri/api.proto. */
export interface RuntimeServiceMethods {
  Version: [{ version: string }, VersionResponse];
  RunPodSandbox: [{ config: PodSandboxConfig; runtime_handler?: string }, { pod_sandbox_id: string }];
  StopPodSandbox: [{ pod_sandbox_id: string }, Record<string, never>];
  RemovePodSandbox: [{ pod_sandbox_id: string }, Record<string, never>];
  PodSandboxStatus: [{ pod_sandbox_id: string; verbose?: boolean }, PodSandboxStatusResponse];
  ListPodSandbox: [{ filter?: PodSandboxFilter }, { items: PodSandbox[] }];
}

type ClientCtor = new (target: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => grpc.Client;
let runtimeServiceCtor: ClientCtor | undefined;

/**
 * Loads proto/cri/api.proto once per process (~100 ms the first time) and returns
 * the generated `runtime.v1.RuntimeService` client constructor.
 * @throws Error if the .proto file is missing or does not parse.
 */
function loadRuntimeService(): ClientCtor {
  if (!runtimeServiceCtor) {
    const def = protoLoader.loadSync(CRI_PROTO_PATH, {
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { runtime: { v1: { RuntimeService: ClientCtor } } };
    runtimeServiceCtor = pkg.runtime.v1.RuntimeService;
  }
  return runtimeServiceCtor;
}

/**
 * Turns a CRI endpoint as kubelet spells it (`unix:///run/x.sock`, `unix:/run/x.sock`
 * or a bare absolute path `/run/x.sock`) into the socket's absolute path.
 * @throws TypeError for any other scheme (tcp://, npipe://) or a relative path:
 *   eni-ipam only talks to a node-local runtime over a Unix socket.
 */
export function criSocketPath(endpoint: string): string {
  const e = endpoint.trim();
  let p: string;
  if (e.startsWith('unix://')) p = e.slice('unix://'.length);
  else if (e.startsWith('unix:')) p = e.slice('unix:'.length);
  else p = e;
  if (!p.startsWith('/'))
    throw new TypeError(`CRI endpoint must be a Unix socket (unix:///path or /path), got ${JSON.stringify(endpoint)}`);
  return p;
}

/**
 * A typed, promise-returning `runtime.v1.RuntimeService` client over one Unix socket.
 * Every call carries an absolute gRPC deadline; errors are the raw grpc-js
 * `ServiceError`s (callers map them). Reconnect backoff is capped at 1 s so a
 * runtime that comes back is seen on the next retry.
 */
export class RuntimeServiceClient {
  private readonly client: grpc.Client;

  /** @param socketPath absolute path of the runtime's Unix socket. */
  constructor(readonly socketPath: string) {
    const Ctor = loadRuntimeService();
    this.client = new Ctor(`unix://${socketPath}`, grpc.credentials.createInsecure(), {
      'grpc.initial_reconnect_backoff_ms': 200,
      'grpc.max_reconnect_backoff_ms': 1000,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
    });
  }

  /**
   * Calls unary RPC `method` with `req`.
   * @param deadline absolute deadline (ms since the epoch, `Date.now()` clock).
   * @throws grpc.ServiceError (code DEADLINE_EXCEEDED, UNAVAILABLE, NOT_FOUND, UNIMPLEMENTED...).
   */
  call<M extends keyof RuntimeServiceMethods>(
    method: M,
    req: RuntimeServiceMethods[M][0],
    deadline: number,
  ): Promise<RuntimeServiceMethods[M][1]> {
    return new Promise((resolve, reject) => {
      const fn = (
        this.client as unknown as Record<
          string,
          (r: unknown, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null, out: unknown) => void) => void
        >
      )[method];
      fn.call(this.client, req, { deadline }, (err, out) =>
        err ? reject(err) : resolve(out as RuntimeServiceMethods[M][1]),
      );
    });
  }

  /** Closes the channel; pending calls fail with CANCELLED/UNAVAILABLE. */
  close(): void {
    this.client.close();
  }
}
