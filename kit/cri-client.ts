/**
 * A small CRI `runtime.v1.RuntimeService` client for tests, playing kubelet's part
 * against a real runtime (proto/cri/api.proto, via ipamd's gRPC plumbing). Creates
 * sandboxes the way kubelet does: metadata + the `io.kubernetes.pod.*` labels,
 * pod network namespace (network POD, pid CONTAINER, ipc POD).
 */
import {
  RuntimeServiceClient,
  criSocketPath,
  type PodSandbox,
  type PodSandboxConfig,
  type PodSandboxFilter,
  type PodSandboxStatusResponse,
  type VersionResponse,
} from '../ipamd/restore/cri-source-grpc.js';
import type { ContainerConfig, ContainerMethods, ContainerStatus, CriContainer } from './cri-container-types.js';

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
  /** Share the node's PID namespace (hostPID: true). */
  hostPID?: boolean;
  /** The sandbox may hold privileged containers (kubelet sets it when any container is privileged). */
  privileged?: boolean;
}

/** A generic unary call on the RuntimeService channel (the container RPCs are not in ipamd's typed method map). */
type AnyCall = (method: string, req: unknown, deadline: number) => Promise<unknown>;

/** Test CRI client; every call has a deadline (`timeoutMs`, default 60 000 ms). */
export class CriTestClient {
  private readonly rt: RuntimeServiceClient;

  /** @param endpoint `unix:///path` or `/path` of the runtime socket. */
  constructor(
    endpoint: string,
    readonly timeoutMs = 60_000,
  ) {
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
    return (await this.rt.call('RunPodSandbox', { config: this.sandboxConfig(p), runtime_handler: '' }, this.deadline))
      .pod_sandbox_id;
  }

  /** The `PodSandboxConfig` kubelet would send for `p` (also needed by CreateContainer). */
  sandboxConfig(p: PodSpec): PodSandboxConfig {
    return {
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
      linux: {
        security_context: {
          namespace_options: {
            network: p.hostNetwork ? ('NODE' as const) : ('POD' as const),
            pid: p.hostPID ? ('NODE' as const) : ('CONTAINER' as const),
            ipc: 'POD' as const,
          },
          ...(p.privileged ? { privileged: true } : {}),
        },
      },
    };
  }

  private containerCall<M extends keyof ContainerMethods>(
    method: M,
    req: ContainerMethods[M][0],
    deadline = this.deadline,
  ): Promise<ContainerMethods[M][1]> {
    return (this.rt.call as unknown as AnyCall).call(this.rt, method, req, deadline) as Promise<ContainerMethods[M][1]>;
  }

  /**
   * `CreateContainer` in sandbox `sandboxId` (created from `sandbox`, which the runtime needs again).
   * @returns the container id. @throws grpc ServiceError (e.g. image not found).
   */
  async createContainer(sandboxId: string, sandbox: PodSandboxConfig, config: ContainerConfig): Promise<string> {
    return (await this.containerCall('CreateContainer', { pod_sandbox_id: sandboxId, config, sandbox_config: sandbox }))
      .container_id;
  }

  /** `StartContainer`. @throws grpc ServiceError when the process cannot start. */
  async startContainer(id: string): Promise<void> {
    await this.containerCall('StartContainer', { container_id: id });
  }

  /** `StopContainer`: SIGTERM, SIGKILL after `timeoutS` seconds (kubelet: terminationGracePeriodSeconds). Idempotent. */
  async stopContainer(id: string, timeoutS: number): Promise<void> {
    await this.containerCall(
      'StopContainer',
      { container_id: id, timeout: timeoutS },
      Date.now() + this.timeoutMs + timeoutS * 1000,
    );
  }

  /** `RemoveContainer` (stops it first if needed). Idempotent. */
  async removeContainer(id: string): Promise<void> {
    await this.containerCall('RemoveContainer', { container_id: id });
  }

  /** `ListContainers`, optionally only those of one sandbox. */
  async listContainers(podSandboxId?: string): Promise<CriContainer[]> {
    return (
      await this.containerCall('ListContainers', podSandboxId ? { filter: { pod_sandbox_id: podSandboxId } } : {})
    ).containers;
  }

  /** `ContainerStatus` (state, exit code, reason). @throws grpc NOT_FOUND for an unknown id. */
  async containerStatus(id: string): Promise<ContainerStatus> {
    const st = (await this.containerCall('ContainerStatus', { container_id: id })).status;
    if (!st) throw new Error(`ContainerStatus ${id}: no status`);
    return st;
  }

  /**
   * `ExecSync`: runs `cmd` in the running container `id`, as kubelet runs an exec probe.
   * @param timeoutS the probe's timeoutSeconds (0 = none).
   * @returns exit code and output. @throws grpc ServiceError when the exec cannot run at all.
   */
  async execSync(
    id: string,
    cmd: string[],
    timeoutS: number,
  ): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    const r = await this.containerCall(
      'ExecSync',
      { container_id: id, cmd, timeout: timeoutS },
      Date.now() + this.timeoutMs + timeoutS * 1000,
    );
    return {
      exitCode: r.exit_code,
      stdout: Buffer.from(r.stdout ?? []).toString('utf8'),
      stderr: Buffer.from(r.stderr ?? []).toString('utf8'),
    };
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
      if (!st || st.state !== 'SANDBOX_READY' || st.linux?.namespaces?.options?.network === 'NODE' || !st.network?.ip)
        continue;
      out.push({
        id: sb.id,
        ip: st.network.ip,
        podName: st.metadata?.name ?? '',
        podNamespace: st.metadata?.namespace ?? '',
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
      const info = JSON.parse(st.info['info'] ?? '{}') as {
        runtimeSpec?: { linux?: { namespaces?: { type: string; path?: string }[] } };
      };
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
