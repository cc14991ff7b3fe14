/**
 * The demo's pods: their network namespaces (half named `/var/run/netns/<prefix>-pod-<i>`
 * as containerd makes them, half `/proc/<pid>/ns/net` of a process as docker-shim did),
 * the real CNI ADD and DEL for each through the native shim, and each pod's TCP probes: to
 * the node, and to the VPC peer across the VPC data plane (kit/vpc/peer.ts).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { execPlugin, SHIM_PATH } from '../kit/cni-exec.js';
import { createNamedNetns, createProcNetns, tcpSendFrom, type Netns } from '../kit/netns.js';

/** One demo pod and what the demo learnt about it. */
export interface Pod {
  name: string;
  ns: Netns;
  containerId: string;
  /** Its IPv4 (dotted quad) from the ADD result. */
  ip?: string;
  eni?: string;
  /** The device number of its ENI (0: the primary ENI, `eth0`). */
  device?: number;
  /** The ADD's wall time, ms. */
  addMs?: number;
  /** The source address the node's listener saw, or why the probe failed. */
  node?: Probe;
  /** The source address the VPC peer saw, or why the probe failed. */
  vpc?: Probe;
}

/** One TCP probe's outcome: the source address the far end saw, or the error. */
export type Probe = { saw: string } | { error: string };

/** A TCP listener a pod probes: it answers each connection with the source address it saw. */
export interface ProbeTarget {
  host: string;
  port: number;
}

/** The plugin's network config, as the CNI runtime would pass it on stdin. */
export type PluginConfig = Record<string, unknown>;

/**
 * Creates `count` pod network namespaces (even: named `<prefix>-pod-<i>`, odd: held by a
 * process), pushing each onto `pods` as soon as it exists so the caller's teardown removes
 * it. @throws Error from `ip`/`unshare`, or the abort reason once `signal` is aborted.
 */
export async function createPods(count: number, prefix: string, pods: Pod[], signal: AbortSignal): Promise<void> {
  for (let i = 0; i < count; i++) {
    signal.throwIfAborted();
    const name = `demo-${i}`;
    const ns = i % 2 === 0 ? await createNamedNetns(`${prefix}-pod-${i}`) : await createProcNetns(name);
    pods.push({ name, ns, containerId: randomBytes(32).toString('hex') });
  }
}

/**
 * CNI ADD through the shim for each pod, one at a time; records its IP and ADD time (ms).
 * @throws Error on the first failure (with the plugin's output), or the abort reason.
 */
export async function addPods(config: PluginConfig, pods: Pod[], signal: AbortSignal): Promise<void> {
  for (const p of pods) {
    signal.throwIfAborted();
    const r = await execPlugin({
      command: 'ADD',
      containerId: p.containerId,
      netns: p.ns.path,
      ifName: 'eth0',
      config,
      plugin: [SHIM_PATH],
      args: {
        IgnoreUnknown: '1',
        K8S_POD_NAMESPACE: 'default',
        K8S_POD_NAME: p.name,
        K8S_POD_INFRA_CONTAINER_ID: p.containerId,
        K8S_POD_UID: randomUUID(),
      },
    });
    if (r.code !== 0) throw new Error(`ADD ${p.name} failed: ${r.stdout}${r.stderr}`);
    p.ip = String(r.json.ips[0].address).split('/')[0];
    p.addMs = r.ms;
  }
}

/**
 * Records each pod's ENI and device number from ipamd's introspection (`GET /v1/allocations`
 * and `/v1/status` on 127.0.0.1:`introspectionPort`). @throws Error when ipamd does not answer.
 */
export async function recordEnis(introspectionPort: number, pods: Pod[]): Promise<void> {
  const get = async (p: string): Promise<unknown> => (await fetch(`http://127.0.0.1:${introspectionPort}${p}`)).json();
  const allocs = (await get('/v1/allocations')) as Array<{ containerID: string; eniId: string }>;
  const status = (await get('/v1/status')) as { enis: Array<{ eniId: string; deviceNumber: number }> };
  const devByEni = new Map(status.enis.map((e) => [e.eniId, e.deviceNumber]));
  for (const p of pods) {
    p.eni = allocs.find((a) => a.containerID === p.containerId)?.eniId;
    p.device = p.eni ? devByEni.get(p.eni) : undefined;
  }
}

/**
 * Connects from each pod to the node's listener and to the VPC peer (each answers with the
 * source address it saw) and records both. @returns true when both saw every pod's own IP.
 * @throws the abort reason once `signal` is aborted.
 */
export async function probePods(
  pods: Pod[],
  targets: { node: ProbeTarget; vpc: ProbeTarget },
  signal: AbortSignal,
): Promise<boolean> {
  const probe = async (p: Pod, t: ProbeTarget): Promise<Probe> => {
    try {
      return { saw: (await tcpSendFrom(p.ns.path, t.host, t.port, p.name)).trim() };
    } catch (e) {
      return { error: probeError((e as Error).message) };
    }
  };
  let ok = true;
  for (const p of pods) {
    signal.throwIfAborted();
    p.node = await probe(p, targets.node);
    p.vpc = await probe(p, targets.vpc);
    for (const r of [p.node, p.vpc]) if (!('saw' in r) || r.saw !== p.ip) ok = false;
  }
  return ok;
}

/** A probe's failure in a few words: `timeout`'s 124 as "no answer in 5 s", else the last line bash printed. */
function probeError(message: string): string {
  const m = /exited (\d+): ([^]*)$/.exec(message);
  if (!m) return message.split('\n')[0]!;
  if (m[1] === '124') return 'no answer in 5 s';
  return m[2]!.trim().split('\n').pop() || `exit ${m[1]}`;
}

/** CNI DEL for every pod, printing each failure and going on. @returns true when every DEL succeeded. */
export async function deletePods(config: PluginConfig, pods: Pod[], print: (l: string) => void): Promise<boolean> {
  let ok = true;
  for (const p of pods) {
    const r = await execPlugin({
      command: 'DEL',
      containerId: p.containerId,
      netns: p.ns.path,
      ifName: 'eth0',
      config,
      plugin: [SHIM_PATH],
    });
    if (r.code !== 0) {
      ok = false;
      print(`DEL ${p.name} failed: ${r.stdout}`);
    }
  }
  return ok;
}
