/**
 * The CRI runtime as a restore source (docs/design.md#4-restore-after-restart, docs/design.md#8-lessons-the-field-paid-for): which pod sandboxes are live on
 * this node, with their pod identity and IP, read from the container runtime over the
 * Kubernetes CRI `runtime.v1.RuntimeService` (k8s.io/cri-api, proto/cri/api.proto).
 *
 * The read is all-or-nothing: either every READY sandbox is returned, or the call
 * throws CriUnavailableError and the caller must treat the source as unreadable
 * (releases frozen), never as "no pods".
 */
import { monoNow } from '../clock.js';
import { existsSync, statSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { RuntimeServiceClient, criSocketPath, type PodSandbox, type PodSandboxStatus } from './cri-source-grpc.js';

/** One live (SANDBOX_READY) pod sandbox as seen by the CRI runtime. */
export interface CriSandbox {
  /** Sandbox (pause container) id; the CNI `CNI_CONTAINERID` / `K8S_POD_INFRA_CONTAINER_ID`. */
  id: string;
  podName: string;
  podNamespace: string;
  podUid: string;
  /** Pod IP from `PodSandboxStatus.status.network.ip`; absent for host-network pods or when the runtime has none. */
  ip?: string;
  /** Creation time in nanoseconds since the Unix epoch, as a decimal string (int64 on the wire). */
  createdAtNs?: string;
}

/**
 * The runtime could not be read: socket missing, connection refused, deadline exceeded,
 * method UNIMPLEMENTED (e.g. a runtime that only speaks v1alpha2), or any other failure.
 * `code` is the gRPC status name when the failure came from gRPC.
 */
export class CriUnavailableError extends Error {
  override name = 'CriUnavailableError';
  constructor(
    message: string,
    readonly code?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Well-known CRI sockets probed in order when none is configured (docs/design.md#8-lessons-the-field-paid-for). */
export const CRI_SOCKET_CANDIDATES = [
  '/run/containerd/containerd.sock',
  '/var/run/crio/crio.sock',
  '/var/run/cri-dockerd.sock',
] as const;

/** Default and maximum deadline of one source read, ms (docs/design.md#4-restore-after-restart: ≤ 5 s). */
export const CRI_MAX_TIMEOUT_MS = 5000;

/** Bound on concurrent PodSandboxStatus calls during one read. */
const STATUS_CONCURRENCY = 8;

/**
 * Chooses the CRI endpoint.
 * @param configured `CRI_RUNTIME_ENDPOINT` (`unix:///path` or `/path`); used as is when non-empty.
 * @param exists file-existence test (default `fs.existsSync`), injectable for unit tests.
 * @returns `{ endpoint: 'unix:///abs/path', detected }`: `detected` is true only when the
 *   socket was found by probing CRI_SOCKET_CANDIDATES. With nothing configured and no
 *   candidate present, the containerd default is returned with `detected: false`; the
 *   caller then finds it unreadable (CriUnavailableError) and freezes releases.
 * @throws TypeError if `configured` is not a Unix socket endpoint.
 */
export function detectCriEndpoint(
  configured: string | undefined,
  exists: (p: string) => boolean = existsSync,
): { endpoint: string; detected: boolean } {
  if (configured && configured.trim() !== '')
    return { endpoint: `unix://${criSocketPath(configured)}`, detected: false };
  for (const p of CRI_SOCKET_CANDIDATES) {
    if (exists(p)) return { endpoint: `unix://${p}`, detected: true };
  }
  return { endpoint: `unix://${CRI_SOCKET_CANDIDATES[0]}`, detected: false };
}

/** Maps any failure to CriUnavailableError, keeping the gRPC status name. */
function unavailable(what: string, endpoint: string, e: unknown): CriUnavailableError {
  if (e instanceof CriUnavailableError) return e;
  const se = e as Partial<grpc.ServiceError>;
  if (typeof se?.code === 'number') {
    const code = grpc.status[se.code] ?? String(se.code);
    return new CriUnavailableError(`CRI ${what} on ${endpoint} failed: ${code}: ${se.details || se.message}`, code, {
      cause: e,
    });
  }
  return new CriUnavailableError(
    `CRI ${what} on ${endpoint} failed: ${(e as Error)?.message ?? String(e)}`,
    undefined,
    { cause: e },
  );
}

/**
 * Reads live pod sandboxes from the node's CRI runtime (`ListPodSandbox` +
 * `PodSandboxStatus`, CRI runtime.v1). One instance keeps one gRPC channel; it is
 * re-created after a failure so a restarted runtime is picked up on the next read.
 */
export class CriSource {
  /** The endpoint as `unix:///abs/path`. */
  readonly endpoint: string;
  /** Deadline of one whole `listReadySandboxes()` read, ms (1..5000). */
  readonly timeoutMs: number;
  private readonly socketPath: string;
  private readonly log: Logger | undefined;
  private client: RuntimeServiceClient | undefined;

  /**
   * @param o.endpoint `unix:///path` or `/path` (see detectCriEndpoint).
   * @param o.timeoutMs deadline of one read in ms; default and maximum 5000.
   * @param o.log pino logger (debug: per-read summary).
   * @throws TypeError if the endpoint is not a Unix socket.
   */
  constructor(o: { endpoint: string; timeoutMs?: number; log?: Logger }) {
    this.socketPath = criSocketPath(o.endpoint);
    this.endpoint = `unix://${this.socketPath}`;
    this.timeoutMs = Math.max(1, Math.min(o.timeoutMs ?? CRI_MAX_TIMEOUT_MS, CRI_MAX_TIMEOUT_MS));
    this.log = o.log;
  }

  /**
   * Lists every SANDBOX_READY pod sandbox with pod name/namespace/uid (from the kubelet
   * labels `io.kubernetes.pod.name|namespace|uid`, falling back to the sandbox metadata)
   * and its pod IP (from PodSandboxStatus; ListPodSandbox carries none).
   *
   * All calls of one read share one deadline, `timeoutMs` after the start. A sandbox
   * that disappears (NOT_FOUND) or stops being ready between the list and its status
   * call is left out: it no longer holds an IP. Host-network sandboxes
   * (`linux.namespaces.options.network == NODE`) are returned without `ip`.
   *
   * @returns the sandboxes, sorted by id.
   * @throws CriUnavailableError on any other failure; never returns a partial list.
   */
  async listReadySandboxes(): Promise<CriSandbox[]> {
    const t0 = monoNow();
    const deadline = t0 + this.timeoutMs;
    if (!this.socketExists())
      throw new CriUnavailableError(`CRI socket ${this.socketPath} does not exist`, 'UNAVAILABLE');
    const client = (this.client ??= new RuntimeServiceClient(this.socketPath));
    try {
      const list = await client.call('ListPodSandbox', { filter: { state: { state: 'SANDBOX_READY' } } }, deadline);
      const ready = list.items.filter((s) => s.state === 'SANDBOX_READY');
      const out: CriSandbox[] = [];
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < ready.length) {
          const sb = ready[next++]!;
          const s = await this.statusOf(client, sb, deadline);
          if (s) out.push(s);
        }
      };
      await Promise.all(Array.from({ length: Math.min(STATUS_CONCURRENCY, ready.length) }, worker));
      out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      this.log?.debug({ endpoint: this.endpoint, sandboxes: out.length, ms: monoNow() - t0 }, 'CRI sandboxes read');
      return out;
    } catch (e) {
      // Drop the channel: the next read reconnects from scratch (runtime restarted, socket re-created).
      this.resetClient();
      throw unavailable('read', this.endpoint, e);
    }
  }

  /**
   * The runtime's identity from CRI `Version` (`runtime_name`, `runtime_version`; kubelet
   * reports the same as `status.nodeInfo.containerRuntimeVersion` = `<name>://<version>`).
   * Bounded by `timeoutMs`.
   * @returns undefined when the runtime does not answer it (UNIMPLEMENTED, unreachable,
   *   empty name): the caller then judges the runtime on its sandboxes alone. Never throws.
   */
  async runtimeIdentity(): Promise<{ name: string; version: string } | undefined> {
    if (!this.socketExists()) return undefined;
    const client = (this.client ??= new RuntimeServiceClient(this.socketPath));
    try {
      const v = await client.call('Version', { version: 'v1' }, Date.now() + this.timeoutMs);
      return v.runtime_name ? { name: v.runtime_name, version: v.runtime_version } : undefined;
    } catch (e) {
      this.log?.debug(
        { endpoint: this.endpoint, err: (e as Error).message },
        'CRI Version failed; runtime identity unknown',
      );
      return undefined;
    }
  }

  /** Releases the gRPC channel. The instance stays usable (the next read reconnects). */
  close(): void {
    this.resetClient();
  }

  private resetClient(): void {
    this.client?.close();
    this.client = undefined;
  }

  private socketExists(): boolean {
    try {
      return statSync(this.socketPath).isSocket();
    } catch {
      return false;
    }
  }

  /** PodSandboxStatus of one listed sandbox; undefined if it vanished or is no longer ready. */
  private async statusOf(
    client: RuntimeServiceClient,
    sb: PodSandbox,
    deadline: number,
  ): Promise<CriSandbox | undefined> {
    let st: PodSandboxStatus | null;
    try {
      st = (await client.call('PodSandboxStatus', { pod_sandbox_id: sb.id }, deadline)).status;
    } catch (e) {
      if ((e as Partial<grpc.ServiceError>)?.code === grpc.status.NOT_FOUND) {
        this.log?.debug({ sandbox: sb.id }, 'CRI sandbox removed between ListPodSandbox and PodSandboxStatus');
        return undefined;
      }
      throw e;
    }
    if (!st) throw new CriUnavailableError(`CRI PodSandboxStatus(${sb.id}) returned no status`);
    if (st.state !== 'SANDBOX_READY') return undefined;
    const labels = { ...sb.labels, ...st.labels };
    const md = st.metadata ?? sb.metadata;
    const r: CriSandbox = {
      id: sb.id,
      podName: labels['io.kubernetes.pod.name'] ?? md?.name ?? '',
      podNamespace: labels['io.kubernetes.pod.namespace'] ?? md?.namespace ?? '',
      podUid: labels['io.kubernetes.pod.uid'] ?? md?.uid ?? '',
    };
    const hostNetwork = st.linux?.namespaces?.options?.network === 'NODE';
    if (!hostNetwork && st.network?.ip) r.ip = st.network.ip;
    const created = st.created_at || sb.created_at;
    if (created && created !== '0') r.createdAtNs = created;
    return r;
  }
}
