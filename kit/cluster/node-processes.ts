/**
 * The test cluster's node: containerd 2.x, kubelet and kube-proxy in the node's network
 * and mount namespaces, with the pause image, the workload image and (when given) an
 * image archive imported into containerd's `k8s.io` namespace (nothing is ever pulled).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, type Dirent } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { CriTestClient } from '../cri-client.js';
import { rmdirTree } from '../host-scan.js';
import type { NodeMountNs } from '../node-mountns.js';
import { buildPauseImage } from '../pause-image.js';
import { waitFor } from '../wait.js';
import type { ClusterBinaries } from './binaries.js';
import { containerdConfig, kubeletConfig, kubeProxyConfig } from './configs.js';
import { startDaemon, waitStarted, type DaemonProcess } from './daemon-process.js';
import { buildEchoImage } from './echo-image.js';
import type { Kubectl } from './kubectl.js';
import { kubeletId, type Pki } from './pki.js';
import type { FamilyPlan } from './ip-family.js';

const run = promisify(execFile);

/**
 * The cgroups (v1, every hierarchy) a cluster's kubelets put pods under:
 * `/eni-ipam-k8s-<owner pid>` for the first node, `/eni-ipam-k8s-<owner pid>-n<index>` for the others.
 */
export const CGROUP_PREFIX = 'eni-ipam-k8s-';
const CGROUP_ROOT = `/${CGROUP_PREFIX}${process.pid}`;

/** The kubelet cgroup root of node `index` of this process's cluster (see {@link CGROUP_PREFIX}). */
export const cgroupRootOf = (index: number): string => (index === 0 ? CGROUP_ROOT : `${CGROUP_ROOT}-n${index}`);

/** The node's processes. */
export interface NodeProcesses {
  /** containerd's socket, test-side path. */
  criSocket: string;
  /** Reference of the workload image (a static TCP echo server on :8080). */
  echoImage: string;
  /** `name` → the running process (containerd, kubelet, kube-proxy). */
  procs: Map<string, DaemonProcess>;
  /** Imports an OCI archive into containerd's k8s.io namespace. @throws Error with ctr's stderr. */
  importImage(archive: string): Promise<void>;
  /** Stops `name` (SIGTERM, or SIGKILL with `kill`) and starts it again with the same arguments. */
  restart(name: 'containerd' | 'kubelet', kill?: boolean): Promise<void>;
  /** Stops kube-proxy, kubelet, every pod sandbox (through the CRI) and containerd; removes the cgroups. */
  stop(): Promise<void>;
}

/**
 * Starts containerd (waits for the CRI), imports the images, starts kubelet (waits until
 * the Node object exists) and kube-proxy.
 * @throws Error naming the component that failed, with its log tail (what started is stopped).
 */
export async function startNodeProcesses(o: {
  bins: ClusterBinaries;
  dir: string;
  netns: string;
  mountNs: NodeMountNs;
  pki: Pki;
  nodeIp: string;
  /** The node's Kubernetes addresses (kubelet `--node-ip`, primary first) and family. */
  family: FamilyPlan;
  nodeName: string;
  /** The kubelet's cgroup root ({@link cgroupRootOf}). */
  cgroupRoot: string;
  /** More OCI archives to import before the kubelet starts (the images the cluster's other nodes have). */
  images?: string[];
  /** The kubelet's maxPods (default 110). */
  maxPods?: number;
  kubectl: Kubectl;
  host(p: string): string;
}): Promise<NodeProcesses> {
  const cfg = path.join(o.dir, 'node');
  const logs = path.join(o.dir, 'logs');
  await mkdir(cfg, { recursive: true });
  await mkdir(logs, { recursive: true });
  const pause = await buildPauseImage();
  const echo = await buildEchoImage();
  await writeNodeConfigs(o, cfg, pause.ref);
  const criSocket = o.host('/run/containerd/containerd.sock');
  const ctd = (b: string): string => path.join(o.bins.containerd, b);
  // containerd execs its shim by name from PATH; runc is Debian's.
  const env = { PATH: `${o.bins.containerd}:${process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` };
  const argv = nodeArgv(o, cfg);
  const procs = new Map<string, DaemonProcess>();
  const start = (name: string): DaemonProcess => {
    const p = startDaemon({
      name,
      argv: argv[name]!,
      logFile: path.join(logs, `${name}.log`),
      netns: o.netns,
      mountns: o.mountNs.nsPath,
      ...(o.mountNs.utsPath ? { uts: o.mountNs.utsPath } : {}),
      env,
    });
    procs.set(name, p);
    return p;
  };
  const importImage = async (archive: string): Promise<void> => {
    await run(ctd('ctr'), ['--address', criSocket, '-n', 'k8s.io', 'images', 'import', archive], {
      maxBuffer: 1 << 24,
    }).catch((e: { stderr?: string; message: string }) => {
      throw new Error(`ctr images import ${archive}: ${(e.stderr ?? e.message).trim()}`);
    });
  };
  const startContainerd = async (): Promise<void> =>
    waitStarted(start('containerd'), 'CRI Version on containerd', () => criAnswers(criSocket), 60_000, 200);
  const nodeExists = async (): Promise<boolean> => (await o.kubectl.try(['get', 'node', o.nodeName])).code === 0;
  const stopAll = async (): Promise<void> => {
    for (const n of ['kube-proxy', 'kubelet']) await procs.get(n)?.stop();
    const c = procs.get('containerd');
    if (c && !c.exited()) await removeSandboxes(criSocket);
    await c?.stop(15_000);
    await removeCgroupRoot(o.cgroupRoot);
  };
  try {
    await startContainerd();
    await importImage(pause.tarPath);
    await importImage(echo.tarPath);
    for (const a of o.images ?? []) await importImage(a);
    // kubelet refuses a cgroupRoot missing in any hierarchy ("has some missing paths").
    for (const ctl of cgroupControllers())
      await mkdir(path.join('/sys/fs/cgroup', ctl, o.cgroupRoot), { recursive: true });
    await waitStarted(start('kubelet'), `Node ${o.nodeName} registered`, nodeExists, 90_000, 200);
    start('kube-proxy');
    return {
      criSocket,
      echoImage: echo.ref,
      procs,
      importImage,
      async restart(name, kill = false) {
        await procs.get(name)?.stop(kill ? 0 : 10_000);
        if (name === 'containerd') await startContainerd();
        else start(name);
      },
      stop: stopAll,
    };
  } catch (e) {
    await stopAll().catch(() => undefined);
    throw e;
  }
}

/** What {@link writeNodeConfigs} and {@link nodeArgv} read of the node's options. */
type NodeConfigInputs = {
  bins: ClusterBinaries;
  dir: string;
  pki: Pki;
  nodeIp: string;
  family: FamilyPlan;
  nodeName: string;
  cgroupRoot: string;
  maxPods?: number;
};

/** Writes containerd.toml, kubelet.yaml and kube-proxy.yaml into `cfg` (a directory); `pauseRef`: the pause image's reference. */
async function writeNodeConfigs(o: NodeConfigInputs, cfg: string, pauseRef: string): Promise<void> {
  await writeFile(
    path.join(cfg, 'containerd.toml'),
    containerdConfig({ root: path.join(o.dir, 'containerd-root'), pauseRef }),
  );
  await writeFile(
    path.join(cfg, 'kubelet.yaml'),
    kubeletConfig({
      address: o.family.family === 'ipv4' ? o.nodeIp : '::',
      cgroupRoot: o.cgroupRoot,
      maxPods: o.maxPods ?? 110,
      clusterDns: [o.family.dnsIp],
    }),
  );
  await writeFile(
    path.join(cfg, 'kube-proxy.yaml'),
    kubeProxyConfig({
      kubeconfig: o.pki.kubeconfigs['kube-proxy']!,
      nodeName: o.nodeName,
      bindAddress: o.family.bindAddress,
    }),
  );
}

/** Each node process's command line (`name` → argv, the binary first), its config files in `cfg`. */
function nodeArgv(o: NodeConfigInputs, cfg: string): Record<string, string[]> {
  const ctd = (b: string): string => path.join(o.bins.containerd, b);
  const k8s = (b: string): string => path.join(o.bins.k8s, b);
  return {
    containerd: [ctd('containerd'), '--config', path.join(cfg, 'containerd.toml')],
    kubelet: [
      k8s('kubelet'),
      `--config=${path.join(cfg, 'kubelet.yaml')}`,
      `--kubeconfig=${o.pki.kubeconfigs[kubeletId(o.nodeName)]}`,
      `--hostname-override=${o.nodeName}`,
      `--node-ip=${o.family.nodeIps.join(',')}`,
      '--v=1',
    ],
    'kube-proxy': [k8s('kube-proxy'), `--config=${path.join(cfg, 'kube-proxy.yaml')}`, '--v=1'],
  };
}

/** True when containerd's CRI at `socket` (a test-side path) answers Version within 2 s. */
export async function criAnswers(socket: string): Promise<boolean> {
  const cri = new CriTestClient(socket, 2000);
  try {
    await cri.version();
    return true;
  } catch {
    return false;
  } finally {
    cri.close();
  }
}

/**
 * Removes a kubelet cgroup root (default this process's) in every hierarchy: every process
 * still in it (a container whose sandbox the CRI could not remove) is SIGKILLed first, since
 * only empty cgroups can go. Never throws.
 */
export async function removeCgroupRoot(root = CGROUP_ROOT): Promise<void> {
  const memory = path.join('/sys/fs/cgroup', 'memory', root);
  const pids = (): number[] => tasksUnder(memory);
  for (const pid of pids()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await waitFor('the kubelet cgroup root empty', () => pids().length === 0, 10_000, 100).catch(() => undefined);
  for (const ctl of cgroupControllers()) await rmdirTree(path.join('/sys/fs/cgroup', ctl, root));
}

/** PIDs in `dir`'s cgroup and every cgroup below it (v1 `tasks` files). */
function tasksUnder(dir: string): number[] {
  const out: number[] = [];
  const walk = (d: string): void => {
    let entries: Dirent[];
    try {
      entries = readdirSync(d, { withFileTypes: true });
      for (const l of readFileSync(path.join(d, 'tasks'), 'utf8').split('\n')) if (l) out.push(Number(l));
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) walk(path.join(d, e.name));
  };
  walk(dir);
  return out;
}

/** Stops and removes every pod sandbox through the CRI (CNI DEL runs for each). Best effort. */
async function removeSandboxes(socket: string): Promise<void> {
  const cri = new CriTestClient(socket, 30_000);
  try {
    for (const sb of await cri.listPodSandbox()) {
      await cri.stopPodSandbox(sb.id).catch(() => undefined);
      await cri.removePodSandbox(sb.id).catch(() => undefined);
    }
  } catch {
    /* containerd not answering: the mount namespace teardown kills what is left */
  } finally {
    cri.close();
  }
}

/** The cgroup v1 hierarchies under /sys/fs/cgroup (real dirs, not the cpu → cpu,cpuacct links). */
function cgroupControllers(): string[] {
  try {
    return readdirSync('/sys/fs/cgroup', { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
}
