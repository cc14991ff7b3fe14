/**
 * Message shapes of the CRI container RPCs declared in proto/cri/api.proto (the subset
 * of k8s.io/cri-api runtime.v1 a test needs to run a pod's containers as kubelet does),
 * as @grpc/proto-loader decodes them (`keepCase`, int64 as decimal strings, enums as
 * their names, bytes as Buffer).
 */
import type { NamespaceMode, PodSandboxConfig } from '../ipamd/restore/cri-source-grpc.js';

/** `MountPropagation` enum names (CRI; kubelet maps HostToContainer → PROPAGATION_HOST_TO_CONTAINER). */
export type MountPropagation = 'PROPAGATION_PRIVATE' | 'PROPAGATION_HOST_TO_CONTAINER' | 'PROPAGATION_BIDIRECTIONAL';

/** `ContainerState` enum names. */
export type ContainerState = 'CONTAINER_CREATED' | 'CONTAINER_RUNNING' | 'CONTAINER_EXITED' | 'CONTAINER_UNKNOWN';

/** `Mount`: a host path (in the runtime's mount namespace) bound at `container_path`. */
export interface CriMount {
  container_path: string;
  host_path: string;
  readonly?: boolean;
  propagation?: MountPropagation;
}

/** `ContainerConfig` (the declared subset). `command` replaces the image ENTRYPOINT, `args` its CMD. */
export interface ContainerConfig {
  metadata: { name: string; attempt?: number };
  image: { image: string };
  command?: string[];
  args?: string[];
  working_dir?: string;
  envs?: { key: string; value: string }[];
  mounts?: CriMount[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Relative to the sandbox's `log_directory`. */
  log_path?: string;
  linux?: {
    security_context?: {
      capabilities?: { add_capabilities?: string[]; drop_capabilities?: string[] };
      privileged?: boolean;
      namespace_options?: { network?: NamespaceMode; pid?: NamespaceMode; ipc?: NamespaceMode };
    };
  };
}

/** `ContainerStatus` (the declared subset); times are ns since the epoch as decimal strings. */
export interface ContainerStatus {
  id: string;
  metadata: { name: string; attempt: number } | null;
  state: ContainerState;
  created_at: string;
  started_at: string;
  finished_at: string;
  exit_code: number;
  reason: string;
  message: string;
  log_path: string;
}

/** `Container` as ListContainers returns it. */
export interface CriContainer {
  id: string;
  pod_sandbox_id: string;
  metadata: { name: string; attempt: number } | null;
  state: ContainerState;
  created_at: string;
  labels: Record<string, string>;
}

/** Request/response pairs of the container RPCs. */
export interface ContainerMethods {
  CreateContainer: [
    { pod_sandbox_id: string; config: ContainerConfig; sandbox_config: PodSandboxConfig },
    { container_id: string },
  ];
  StartContainer: [{ container_id: string }, Record<string, never>];
  StopContainer: [{ container_id: string; timeout: number }, Record<string, never>];
  RemoveContainer: [{ container_id: string }, Record<string, never>];
  ListContainers: [
    {
      filter?: {
        id?: string;
        pod_sandbox_id?: string;
        state?: { state: ContainerState };
        label_selector?: Record<string, string>;
      };
    },
    { containers: CriContainer[] },
  ];
  ContainerStatus: [
    { container_id: string; verbose?: boolean },
    { status: ContainerStatus | null; info: Record<string, string> },
  ];
  ExecSync: [
    { container_id: string; cmd: string[]; timeout: number },
    { stdout: Buffer; stderr: Buffer; exit_code: number },
  ];
}
