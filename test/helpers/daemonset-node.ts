/**
 * Plays kubelet for one pod of a rendered DaemonSet on a test node: checks/creates its
 * hostPath volumes in the node's mount namespace (node-mountns.ts), runs the sandbox
 * (hostNetwork/hostPID as the spec says), runs each init container to completion in
 * order, then starts the main containers, all through the real CRI (containerd).
 * Probes run their rendered `exec` command through CRI ExecSync, as kubelet's prober
 * does. The mapping from the Kubernetes objects is in daemonset-pod.ts.
 *
 * Safety: every hostPath the pod names must be backed by a per-test bind of the node
 * namespace or be listed in `passthrough` (e.g. `/var/run/netns`, which is the host's on
 * purpose); anything else is refused before a container starts, so a chart change can
 * never make the test write into the real host's directories.
 */
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { PodSandboxConfig } from '../../ipamd/restore/cri-source-grpc.js';
import type { CriTestClient } from '../../kit/cri-client.js';
import {
  containerConfig,
  hostPathVolumes,
  sandboxSpec,
  type K8sContainer,
  type K8sDaemonSet,
  type K8sProbe,
  type PodIdentity,
} from './daemonset-pod.js';
import { canonicalNodePath, type NodeMountNs } from '../../kit/node-mountns.js';
import { waitFor } from '../../kit/wait.js';

/** Result of one exec probe. */
export interface ProbeResult {
  command: string[];
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Options of {@link runDaemonSetPod}. */
export interface RunDaemonSetPodOptions {
  cri: CriTestClient;
  ds: K8sDaemonSet;
  id: PodIdentity;
  node: NodeMountNs;
  /** Host dir for pod logs (kubelet: /var/log/pods); a per-pod dir is made under it. */
  logRoot: string;
  /** hostPaths allowed without a per-test bind (they are the host's on purpose). */
  passthrough?: string[];
  /** How long an init container may run, ms (default 60 000). */
  initTimeoutMs?: number;
}

/** A running DaemonSet pod. */
export interface DaemonSetPod {
  id: PodIdentity;
  sandboxId: string;
  sandboxConfig: PodSandboxConfig;
  /** Pod log dir (container logs at `<dir>/<container>/<attempt>.log`). */
  logDir: string;
  /** Container name → id, for the init containers (exited) and the main ones. */
  containers: Map<string, string>;
  /** Container id of main container `name` (default: the first). */
  containerId(name?: string): string;
  /** The rendered spec of main container `name` (default: the first). */
  container(name?: string): K8sContainer;
  /**
   * Runs the rendered `kind` probe of a main container through ExecSync in container
   * `inContainer` (default: that container itself; see {@link startProbeRunner}).
   * @throws Error when the probe is missing or is not an exec probe.
   */
  probe(
    kind: 'livenessProbe' | 'readinessProbe' | 'startupProbe',
    o?: { container?: string; inContainer?: string },
  ): Promise<ProbeResult>;
  /**
   * Starts a container from the same rendered spec (image, env, mounts, capabilities) but
   * idle, so the probe commands can be run while the main container is stopped or dead;
   * returns its id.
   */
  startProbeRunner(name?: string): Promise<string>;
  /** StopContainer of the main containers with `graceS` (default: the pod's terminationGracePeriodSeconds, else 30); 0 = SIGKILL at once, as a crash. */
  stopContainers(graceS?: number): Promise<void>;
  /** Container log (CRI format) of `name`, '' if none. */
  log(name?: string): Promise<string>;
  /** Stops and removes the containers and the sandbox (kubelet deleting the pod). Idempotent. */
  remove(): Promise<void>;
}

/** Applies hostPath `type` semantics in the node namespace (kubelet's hostPath checks). */
async function prepareHostPath(node: NodeMountNs, v: { name: string; path: string; type: string }): Promise<void> {
  const sh = (script: string): Promise<string> => node.exec(['sh', '-c', script, 'sh', v.path]);
  const fail = (what: string): never => {
    throw new Error(`hostPath volume ${v.name} (${v.path}, type ${v.type}): ${what}`);
  };
  switch (v.type) {
    case '':
      return;
    case 'DirectoryOrCreate':
      await sh('mkdir -p -m 0755 "$1"');
      return;
    case 'FileOrCreate':
      await sh('mkdir -p "$(dirname "$1")" && [ -e "$1" ] || : > "$1"');
      return;
    case 'Directory':
      await sh('test -d "$1"').catch(() => fail('not a directory on the node'));
      return;
    case 'File':
      await sh('test -f "$1"').catch(() => fail('not a file on the node'));
      return;
    case 'Socket':
      await sh('test -S "$1"').catch(() => fail('not a socket on the node'));
      return;
    default:
      fail('type not modelled');
  }
}

/**
 * Runs the pod: sandbox, init containers (each must exit 0), main containers started.
 * Does not wait for readiness (see {@link waitProbe}).
 * @throws Error naming the volume, container or probe at fault, with the container log
 *   tail for a failed init container; what was created is removed first.
 */
export async function runDaemonSetPod(o: RunDaemonSetPodOptions): Promise<DaemonSetPod> {
  const { cri, ds, id, node } = o;
  const spec = ds.spec.template.spec;
  const passthrough = (o.passthrough ?? []).map(canonicalNodePath);
  for (const v of hostPathVolumes(ds)) {
    const hp = canonicalNodePath(v.path);
    const covered =
      node.hostPathOf(v.path) !== undefined || passthrough.some((p) => hp === p || hp.startsWith(`${p}/`));
    if (!covered)
      throw new Error(
        `hostPath volume ${v.name} (${v.path}) is not backed by the test node (bind it in the node mount namespace or list it as passthrough)`,
      );
  }
  for (const v of hostPathVolumes(ds)) await prepareHostPath(node, v);

  const logDir = path.join(o.logRoot, `${id.namespace}_${id.name}_${id.uid}`);
  await mkdir(logDir, { recursive: true });
  const emptyDirOf = (vol: string): string => path.join(logDir, '..', `emptydir-${id.uid}`, vol);
  const podSpec = sandboxSpec(ds, id, logDir);
  const sandboxConfig = cri.sandboxConfig(podSpec);
  const sandboxId = await cri.runPodSandbox(podSpec);
  const containers = new Map<string, string>();
  let removing: Promise<void> | undefined;
  const mainNames = spec.containers.map((c) => c.name);
  const byName = (name?: string): K8sContainer => {
    const c = name ? spec.containers.find((x) => x.name === name) : spec.containers[0];
    if (!c) throw new Error(`no main container ${name ?? ''} in DaemonSet ${ds.metadata.name}`);
    return c;
  };
  const log = async (name?: string): Promise<string> => {
    const n = name ?? mainNames[0]!;
    return readFile(path.join(logDir, n, '0.log'), 'utf8').catch(() => '');
  };
  const create = async (
    c: K8sContainer,
    override?: Partial<{ name: string; command: string[]; args: string[] }>,
  ): Promise<string> => {
    for (const m of c.volumeMounts ?? []) {
      const v = (spec.volumes ?? []).find((x) => x.name === m.name);
      if (v?.emptyDir) await mkdir(emptyDirOf(v.name), { recursive: true });
    }
    const cfg = containerConfig(c, ds, id, { emptyDirOf });
    if (override?.name) {
      cfg.metadata.name = override.name;
      cfg.log_path = `${override.name}/0.log`;
    }
    if (override?.command) {
      cfg.command = override.command;
      cfg.args = override.args ?? [];
    }
    const cid = await cri.createContainer(sandboxId, sandboxConfig, cfg);
    containers.set(cfg.metadata.name, cid);
    await cri.startContainer(cid);
    return cid;
  };
  const pod: DaemonSetPod = {
    id,
    sandboxId,
    sandboxConfig,
    logDir,
    containers,
    containerId: (name) => {
      const cid = containers.get(byName(name).name);
      if (!cid) throw new Error(`container ${name ?? mainNames[0]} has not been created`);
      return cid;
    },
    container: byName,
    async probe(kind, po = {}) {
      const c = byName(po.container);
      const p: K8sProbe | undefined = c[kind];
      if (!p) throw new Error(`container ${c.name} has no ${kind}`);
      if (!p.exec?.command?.length)
        throw new Error(`container ${c.name} ${kind} is not an exec probe: ${JSON.stringify(p)}`);
      const target = po.inContainer ?? pod.containerId(c.name);
      const r = await cri.execSync(target, p.exec.command, p.timeoutSeconds ?? 1);
      return { command: p.exec.command, ...r };
    },
    async startProbeRunner(name) {
      const c = byName(name);
      // Idle with the image's own runtime (present in any image that runs ipamd).
      return create(c, { name: `${c.name}-probe-runner`, command: ['node', '-e', 'setInterval(() => {}, 1 << 30)'] });
    },
    async stopContainers(graceS) {
      const g = graceS ?? spec.terminationGracePeriodSeconds ?? 30;
      for (const n of mainNames) {
        const cid = containers.get(n);
        if (cid) await cri.stopContainer(cid, g);
      }
    },
    log,
    remove: () =>
      (removing ??= (async () => {
        for (const cid of containers.values()) await cri.removeContainer(cid).catch(() => undefined);
        await cri.stopPodSandbox(sandboxId);
        await cri.removePodSandbox(sandboxId);
      })()),
  };
  try {
    for (const c of spec.initContainers ?? []) {
      const cid = await create(c);
      const st = await waitFor(
        `init container ${c.name} to exit`,
        async () => {
          const s = await cri.containerStatus(cid);
          return s.state === 'CONTAINER_EXITED' ? s : undefined;
        },
        o.initTimeoutMs ?? 60_000,
        100,
      );
      if (st.exit_code !== 0) {
        throw new Error(
          `init container ${c.name} exited ${st.exit_code} (${st.reason} ${st.message}):\n${(await log(c.name)).split('\n').slice(-20).join('\n')}`,
        );
      }
    }
    for (const c of spec.containers) await create(c);
    return pod;
  } catch (e) {
    await pod.remove().catch(() => undefined);
    throw e;
  }
}

/**
 * Polls the `kind` probe of `pod` (every 200 ms) until its exit code satisfies `want`.
 * @returns the last probe result. @throws Error with the last result and the container log tail on timeout.
 */
export async function waitProbe(
  pod: DaemonSetPod,
  kind: 'livenessProbe' | 'readinessProbe',
  want: (code: number) => boolean,
  timeoutMs: number,
  inContainer?: string,
): Promise<ProbeResult> {
  let last: ProbeResult | undefined;
  try {
    return await waitFor(
      `${kind} of ${pod.id.name}`,
      async () => {
        last = await pod
          .probe(kind, inContainer ? { inContainer } : {})
          .catch((e: Error) => ({ command: [], exitCode: -1, stdout: '', stderr: e.message }));
        return want(last.exitCode) ? last : undefined;
      },
      timeoutMs,
      200,
    );
  } catch (e) {
    throw new Error(
      `${(e as Error).message}; last probe: ${JSON.stringify(last)}\n--- ${pod.container().name} log (tail) ---\n${(await pod.log()).split('\n').slice(-30).join('\n')}`,
    );
  }
}
