/**
 * A small CRI `runtime.v1.RuntimeService` client for tests, playing kubelet's part
 * against a real runtime (proto/cri/api.proto, via ipamd's gRPC plumbing). Creates
 * sandboxes the way kubelet does: metadata + the `io.kubernetes.pod.*` labels,
 * pod network namespace (network POD, pid CONTAINER, ipc POD).
 */
import {
  RuntimeServiceClient, criSocketPath,
  type PodSandbox, type PodSandboxFilter, type PodSandboxStatusResponse, type VersionResponse,
} from '../../ipamd/restore/cri-source-grpc.js';

import type { LiveSandbox } from './nothing-lost.js';

export type { PodSandbox, PodSandboxStatusResponse };

/** A pod to run as a sandbox. */
export interface PodSpec {
  name: string;
  namespace: string;
  uid: string;
  /** Extra labels (the kubelet `io.kubernetes.pod.*` labels are always set). */
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Host directory for container logs (kubelet: /var/log/pods/<ns>_<name>_<uid>). */
  logDirectory?: string;
  /** Share the node's network namespace (hostNetwork: true). */
  hostNetwork?: boolean;
}

/** Test CRI client; every call has a deadline (`timeoutMs`, default 60 000 ms). */
export class CriTestClient {
  private readonly rt: RuntimeServiceClient;

  /** @param endpoint `unix:///path` or `/path` of the runtime socket. */
  constructor(endpoint: string, readonly timeoutMs = 60_000) {
    this.rt = new RuntimeServiceClient(criSocketPath(endpoint));
  }

  private get deadline(): number {
    return Date.now() + this.timeoutMs;
  }

  /** `Version` (the runtime's name and CRI API version). */
  version(): Promise<VersionResponse> {
    return this.rt.call('Version', { version: 'v1' }, this.deadline);
  }

  /**
   * `RunPodSandbox`: creates the netns, runs CNI ADD and starts the pause process.
   * @returns the sandbox id.
   * @throws grpc ServiceError on failure (e.g. UNKNOWN with the CNI error text).
   */
  async runPodSandbox(p: PodSpec): Promise<string> {
    const config = {
      metadata: { name: p.name, namespace: p.namespace, uid: p.uid, attempt: 0 },
      // kubelet leaves the hostname empty for host-network pods (runc refuses it without a private UTS namespace).
      hostname: p.hostNetwork ? '' : p.name,
      log_directory: p.logDirectory ?? '',
      labels: {
        ...p.labels,
        'io.kubernetes.pod.name': p.name,
        'io.kubernetes.pod.namespace': p.namespace,
        'io.kubernetes.pod.uid': p.uid,
      },
      annotations: p.annotations ?? {},
      linux: { security_context: { namespace_options: { network: p.hostNetwork ? 'NODE' as const : 'POD' as const, pid: 'CONTAINER' as const, ipc: 'POD' as const } } },
    };
    return (await this.rt.call('RunPodSandbox', { config, runtime_handler: '' }, this.deadline)).pod_sandbox_id;
  }

  /** `StopPodSandbox` (CNI DEL with the netns; idempotent). */
  async stopPodSandbox(id: string): Promise<void> {
    await this.rt.call('StopPodSandbox', { pod_sandbox_id: id }, this.deadline);
  }

  /** `RemovePodSandbox` (idempotent). */
  async removePodSandbox(id: string): Promise<void> {
    await this.rt.call('RemovePodSandbox', { pod_sandbox_id: id }, this.deadline);
  }

  /** `PodSandboxStatus`; with `verbose` the runtime adds debug JSON in `info` (containerd: netns path etc.). */
  podSandboxStatus(id: string, verbose = false): Promise<PodSandboxStatusResponse> {
    return this.rt.call('PodSandboxStatus', { pod_sandbox_id: id, verbose }, this.deadline);
  }

  /** `ListPodSandbox` with an optional filter (id, state, label selector). */
  async listPodSandbox(filter?: PodSandboxFilter): Promise<PodSandbox[]> {
    return (await this.rt.call('ListPodSandbox', filter ? { filter } : {}, this.deadline)).items;
  }

  /** READY, non-host-network sandboxes that have an IP, with their pod identity and creation time (ms). */
  async liveSandboxes(): Promise<LiveSandbox[]> {
    const out: LiveSandbox[] = [];
    for (const sb of await this.listPodSandbox({ state: { state: 'SANDBOX_READY' } })) {
      const st = (await this.podSandboxStatus(sb.id)).status;
      if (!st || st.state !== 'SANDBOX_READY' || st.linux?.namespaces?.options?.network === 'NODE' || !st.network?.ip) continue;
      out.push({
        id: sb.id, ip: st.network.ip, podName: st.metadata?.name ?? '', podNamespace: st.metadata?.namespace ?? '',
        createdAtMs: Math.floor(Number(BigInt(st.created_at || sb.created_at || '0') / 1_000_000n)),
      });
    }
    return out;
  }

  /**
   * Network namespace path of a sandbox, from containerd's verbose status
   * (`info.info` JSON → runtimeSpec.linux.namespaces[type=network].path).
   * @returns undefined if the runtime does not report it (other runtimes, host network).
   */
  async netnsPath(id: string): Promise<string | undefined> {
    const st = await this.podSandboxStatus(id, true);
    try {
      const info = JSON.parse(st.info['info'] ?? '{}') as { runtimeSpec?: { linux?: { namespaces?: { type: string; path?: string }[] } } };
      return info.runtimeSpec?.linux?.namespaces?.find((n) => n.type === 'network')?.path || undefined;
    } catch {
      return undefined;
    }
  }

  /** Closes the channel. */
  close(): void {
    this.rt.close();
  }
}
