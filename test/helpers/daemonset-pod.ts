/**
 * Turns the pod template of a rendered DaemonSet (a parsed `helm template` object) into
 * the CRI requests kubelet would send, as pure functions: the sandbox (hostNetwork,
 * hostPID, privileged), and for each container its ContainerConfig (command/args,
 * env with `fieldRef`s resolved, capabilities, privileged, mounts from the hostPath
 * volumes with their propagation) and its probes' exec commands.
 *
 * Follows kubelet's mapping (pkg/kubelet/kuberuntime: makeMounts, env expansion of
 * `$(VAR)` in command/args, namespace options from hostNetwork/hostPID). Whatever this
 * does not model (a secret or configMap volume, a `resourceFieldRef`, `subPath`) is
 * refused with an error naming the field, never silently dropped.
 */
import type { PodSpec as CriPodSpec } from '../../kit/cri-client.js';
import type { ContainerConfig, CriMount, MountPropagation } from '../../kit/cri-container-types.js';

/** The parts of a Kubernetes container the mapping reads. */
export interface K8sContainer {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  workingDir?: string;
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string }; [k: string]: unknown } }>;
  securityContext?: { privileged?: boolean; capabilities?: { add?: string[]; drop?: string[] } };
  volumeMounts?: Array<{
    name: string;
    mountPath: string;
    readOnly?: boolean;
    mountPropagation?: string;
    subPath?: string;
  }>;
  livenessProbe?: K8sProbe;
  readinessProbe?: K8sProbe;
  startupProbe?: K8sProbe;
}

/** A probe (only `exec` probes are runnable here: ipamd's socket is a Unix socket). */
export interface K8sProbe {
  exec?: { command: string[] };
  timeoutSeconds?: number;
  periodSeconds?: number;
  failureThreshold?: number;
  initialDelaySeconds?: number;
}

/** A pod volume; only `hostPath` and `emptyDir` are modelled. */
export interface K8sVolume {
  name: string;
  hostPath?: { path: string; type?: string };
  emptyDir?: object;
  [k: string]: unknown;
}

/** The pod template spec fields the mapping reads. */
export interface K8sPodSpec {
  hostNetwork?: boolean;
  hostPID?: boolean;
  terminationGracePeriodSeconds?: number;
  initContainers?: K8sContainer[];
  containers: K8sContainer[];
  volumes?: K8sVolume[];
  serviceAccountName?: string;
}

/** A rendered DaemonSet (apps/v1), as parsed from YAML. */
export interface K8sDaemonSet {
  apiVersion: string;
  kind: 'DaemonSet';
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: {
    template: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec: K8sPodSpec;
    };
  };
}

/** Identity of the pod instance being run. */
export interface PodIdentity {
  name: string;
  namespace: string;
  uid: string;
  nodeName: string;
  hostIP: string;
}

/** kubelet's mapping of `mountPropagation` (unset = None = private). */
const PROPAGATION: Record<string, MountPropagation> = {
  None: 'PROPAGATION_PRIVATE',
  HostToContainer: 'PROPAGATION_HOST_TO_CONTAINER',
  Bidirectional: 'PROPAGATION_BIDIRECTIONAL',
};

/**
 * Finds the DaemonSet named `name` (or the only one) among rendered objects.
 * @throws Error when there is none, or several and no name was given.
 */
export function findDaemonSet(objects: unknown[], name?: string): K8sDaemonSet {
  const all = objects.filter((o): o is K8sDaemonSet => !!o && (o as { kind?: string }).kind === 'DaemonSet');
  const hits = name ? all.filter((d) => d.metadata.name === name) : all;
  if (hits.length !== 1)
    throw new Error(
      `expected one DaemonSet${name ? ` named ${name}` : ''} in the rendered manifest, found ${hits.length}`,
    );
  return hits[0]!;
}

/** The CRI sandbox kubelet would run for the pod (hostNetwork, hostPID, privileged when any container is). */
export function sandboxSpec(ds: K8sDaemonSet, id: PodIdentity, logDirectory: string): CriPodSpec {
  const spec = ds.spec.template.spec;
  const all = [...(spec.initContainers ?? []), ...spec.containers];
  return {
    name: id.name,
    namespace: id.namespace,
    uid: id.uid,
    logDirectory,
    labels: { ...ds.spec.template.metadata?.labels },
    annotations: { ...ds.spec.template.metadata?.annotations },
    hostNetwork: spec.hostNetwork === true,
    hostPID: spec.hostPID === true,
    privileged: all.some((c) => c.securityContext?.privileged === true),
  };
}

/** Value of a downward-API `fieldRef` (the paths kubelet supports for env). @throws Error for an unsupported path. */
function fieldValue(path: string, id: PodIdentity, spec: K8sPodSpec): string {
  switch (path) {
    case 'spec.nodeName':
      return id.nodeName;
    case 'metadata.name':
      return id.name;
    case 'metadata.namespace':
      return id.namespace;
    case 'metadata.uid':
      return id.uid;
    case 'spec.serviceAccountName':
      return spec.serviceAccountName ?? 'default';
    // hostNetwork: the pod IP is the node's.
    case 'status.hostIP':
    case 'status.podIP':
      return id.hostIP;
    default:
      throw new Error(
        `env fieldRef.fieldPath ${JSON.stringify(path)} is not modelled (spec.nodeName, metadata.name/namespace/uid, spec.serviceAccountName, status.hostIP/podIP are)`,
      );
  }
}

/** kubelet's `$(VAR)` expansion in command/args (`$$` escapes; unknown names stay as written). */
export function expandVars(s: string, env: Map<string, string>): string {
  return s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name?: string) =>
    m === '$$' ? '$' : env.has(name!) ? env.get(name!)! : m,
  );
}

/** The container's environment in order, with `fieldRef`s resolved. @throws Error for an unmodelled valueFrom. */
export function containerEnv(
  c: K8sContainer,
  id: PodIdentity,
  spec: K8sPodSpec,
): Array<{ key: string; value: string }> {
  const out: Array<{ key: string; value: string }> = [];
  const seen = new Map<string, string>();
  for (const e of c.env ?? []) {
    let v: string;
    if (e.valueFrom) {
      if (!e.valueFrom.fieldRef || Object.keys(e.valueFrom).length !== 1)
        throw new Error(
          `container ${c.name} env ${e.name}: only valueFrom.fieldRef is modelled, got ${Object.keys(e.valueFrom).join(', ')}`,
        );
      v = fieldValue(e.valueFrom.fieldRef.fieldPath, id, spec);
    } else {
      v = expandVars(e.value ?? '', seen);
    }
    seen.set(e.name, v);
    out.push({ key: e.name, value: v });
  }
  return out;
}

/**
 * The CRI mounts of a container: each volumeMount's volume must be a `hostPath` (used
 * verbatim: it names a path in the node's mount namespace) or an `emptyDir` (given a
 * dir by `emptyDirOf`).
 * @throws Error naming the mount for a missing volume, an unmodelled volume kind or `subPath`.
 */
export function containerMounts(c: K8sContainer, spec: K8sPodSpec, emptyDirOf: (volume: string) => string): CriMount[] {
  const vols = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  return (c.volumeMounts ?? []).map((m) => {
    const v = vols.get(m.name);
    if (!v) throw new Error(`container ${c.name} mounts volume ${m.name}, which the pod does not declare`);
    if (m.subPath) throw new Error(`container ${c.name} volumeMount ${m.name}: subPath is not modelled`);
    const propagation = PROPAGATION[m.mountPropagation ?? 'None'];
    if (!propagation)
      throw new Error(
        `container ${c.name} volumeMount ${m.name}: mountPropagation ${m.mountPropagation} is not one of None, HostToContainer, Bidirectional`,
      );
    let host: string;
    if (v.hostPath) host = v.hostPath.path;
    else if (v.emptyDir) host = emptyDirOf(v.name);
    else
      throw new Error(
        `volume ${v.name}: only hostPath and emptyDir volumes are modelled, got ${Object.keys(v)
          .filter((k) => k !== 'name')
          .join(', ')}`,
      );
    return { container_path: m.mountPath, host_path: host, readonly: m.readOnly === true, propagation };
  });
}

/**
 * The ContainerConfig kubelet would send for `c` (attempt `attempt`).
 * @param o.emptyDirOf dir backing an emptyDir volume.
 * @throws Error for anything not modelled (see the module docstring).
 */
export function containerConfig(
  c: K8sContainer,
  ds: K8sDaemonSet,
  id: PodIdentity,
  o: { attempt?: number; emptyDirOf: (volume: string) => string; imageOf?: (image: string) => string },
): ContainerConfig {
  const spec = ds.spec.template.spec;
  const envs = containerEnv(c, id, spec);
  const env = new Map(envs.map((e) => [e.key, e.value]));
  const attempt = o.attempt ?? 0;
  return {
    metadata: { name: c.name, attempt },
    image: { image: o.imageOf ? o.imageOf(c.image) : c.image },
    ...(c.command ? { command: c.command.map((s) => expandVars(s, env)) } : {}),
    ...(c.args ? { args: c.args.map((s) => expandVars(s, env)) } : {}),
    ...(c.workingDir ? { working_dir: c.workingDir } : {}),
    envs,
    mounts: containerMounts(c, spec, o.emptyDirOf),
    labels: {
      'io.kubernetes.container.name': c.name,
      'io.kubernetes.pod.name': id.name,
      'io.kubernetes.pod.namespace': id.namespace,
      'io.kubernetes.pod.uid': id.uid,
    },
    log_path: `${c.name}/${attempt}.log`,
    linux: {
      security_context: {
        ...(c.securityContext?.capabilities
          ? {
              capabilities: {
                add_capabilities: c.securityContext.capabilities.add ?? [],
                drop_capabilities: c.securityContext.capabilities.drop ?? [],
              },
            }
          : {}),
        ...(c.securityContext?.privileged ? { privileged: true } : {}),
        namespace_options: {
          network: spec.hostNetwork ? 'NODE' : 'POD',
          pid: spec.hostPID ? 'NODE' : 'CONTAINER',
          ipc: 'POD',
        },
      },
    },
  };
}

/** The hostPath volumes of the pod with their `type` (kubelet checks/creates them before starting containers). */
export function hostPathVolumes(ds: K8sDaemonSet): Array<{ name: string; path: string; type: string }> {
  return (ds.spec.template.spec.volumes ?? [])
    .filter((v) => v.hostPath)
    .map((v) => ({ name: v.name, path: v.hostPath!.path, type: v.hostPath!.type ?? '' }));
}
