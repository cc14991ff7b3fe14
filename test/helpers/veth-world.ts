/**
 * The world the host veth name tests share (test/integration/cni-veth-names*,
 * cni-veth-race*): a node netns with the plugin's node side (ipamd's rtnetlink helper or
 * `ip` batches), the ipamd stand-in answering in `ipv4` or `ipv6` mode, and the plugin's
 * verbs run in this process against one sandbox at a time (ADD through the current plugin
 * or as the eni-ipam before issue #39 wired it), with what the tests read back: the
 * node's host veths, routes, rules, and whether the node reaches a pod. Needs root.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cmdAdd } from '../../cni-plugin/add.js';
import { cmdCheck } from '../../cni-plugin/check.js';
import { cmdDel } from '../../cni-plugin/del.js';
import { readCniEnv, type CniEnv } from '../../cni-plugin/env.js';
import { cmdGc } from '../../cni-plugin/gc.js';
import { teardownAttachment } from '../../cni-plugin/host-teardown.js';
import type { PluginHost } from '../../cni-plugin/host.js';
import { connectIpamd } from '../../cni-plugin/ipamd-client.js';
import { parseNetConf, type NetConf } from '../../cni-plugin/netconf.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { ipIn, netnsMaker, type Netns } from '../../kit/netns.js';
import { LOCAL_IP } from '../../netfacts/ip-batch.js';
import { waitFor } from '../../kit/wait.js';
import { netlinkNode } from './netlink-node.js';
import { wireLegacy } from './legacy-wiring.js';

export type Family = 'ipv4' | 'ipv6';
export type Side = 'netlink' | 'ip';
export const newId = () => randomBytes(32).toString('hex');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const ipj = async (ns: Netns, args: string[]): Promise<any[]> =>
  JSON.parse((await ipIn(ns.path, ['-j', ...args])) || '[]');
/** Node links named like host veths (`eni…` a pod's, `veth…` an egress pair's), name → MAC. */
export const hostLinks = async (node: Netns): Promise<Map<string, string>> =>
  new Map(
    (await ipj(node, ['link', 'show']))
      .filter((l) => /^(eni|veth)/.test(l.ifname))
      .map((l) => [l.ifname as string, l.address as string]),
  );

export interface World {
  node: Netns;
  mk: (name: string) => Promise<Netns>;
  standin: CniBackendStandIn;
  host: PluginHost;
  conf: NetConf;
  family: Family;
}

export async function world(
  t: { after(fn: () => unknown): void },
  family: Family,
  side: Side,
  tag = `${process.pid}`,
): Promise<World> {
  const mk = netnsMaker(t, `vn${family === 'ipv6' ? '6' : '4'}${side[0]}`, tag);
  const standin = await startCniBackendStandIn();
  standin.ipFamily = family;
  t.after(() => standin.close());
  let node: Netns;
  let host: PluginHost;
  const ipamd = (s: string) => connectIpamd(s);
  if (side === 'netlink') {
    const n = await netlinkNode(t, mk);
    node = n.node;
    host = { ...n.side, ipamd };
  } else {
    node = await mk('n');
    host = { ip: LOCAL_IP, nodeNetns: node.path, ipamd };
  }
  await ipIn(node.path, ['addr', 'add', '10.0.0.10/32', 'dev', 'lo']);
  // The node's own IPv6 (as a node's primary ENI address), the source of its connections to IPv6 pods.
  if (family === 'ipv6') await ipIn(node.path, ['addr', 'add', 'fd00:10::10/128', 'dev', 'lo']);
  const conf = parseNetConf(
    JSON.stringify({
      cniVersion: '1.1.0',
      name: 'aws-cni',
      type: 'eni-ipam',
      ipamdSocket: standin.socket,
      ipFamily: family,
    }),
  );
  return { node, mk, standin, host, conf, family };
}

/** The CNI environment of one sandbox of pod `<namespace>/<name>` (`pod` '': a bare CNI call, no CNI_ARGS). */
export const envOf = (command: string, id: string, netns: string, pod: string): CniEnv =>
  readCniEnv({
    CNI_COMMAND: command,
    CNI_CONTAINERID: id,
    CNI_NETNS: netns,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/opt/cni/bin',
    CNI_ARGS: pod ? `K8S_POD_NAMESPACE=default;K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${id}` : '',
  });

export interface Sandbox {
  id: string;
  pod: string;
  ns: Netns;
  /** The pod's address the node routes to it (IPv6 in `ipv6` mode). */
  ip: string;
  /** Its IPv4 ('' for an IPv6 pod: its egress address has no rules). */
  ipv4: string;
  prevResult: Record<string, unknown>;
}

/** ADD through the current plugin. */
export async function addNew(w: World, pod: string, nsName: string, host: PluginHost = w.host): Promise<Sandbox> {
  const id = newId();
  const ns = await w.mk(nsName);
  const r = await cmdAdd(envOf('ADD', id, ns.path, pod), w.conf, [], { host });
  const ips = (r.result as { ips: Array<{ address: string }> }).ips.map((x) => x.address.split('/')[0]!);
  return {
    id,
    pod,
    ns,
    ip: ips.find((x) => (w.family === 'ipv6') === x.includes(':'))!,
    ipv4: w.family === 'ipv6' ? '' : ips.find((x) => !x.includes(':'))!,
    prevResult: r.result as Record<string, unknown>,
  };
}

/** ADD as the eni-ipam before this change made it (test/helpers/legacy-wiring.ts). */
export async function addOld(w: World, pod: string, nsName: string): Promise<Sandbox> {
  const id = newId();
  const ns = await w.mk(nsName);
  const { plan, result } = await wireLegacy(envOf('ADD', id, ns.path, pod), w.conf, w.host, w.family);
  return { id, pod, ns, ip: w.family === 'ipv6' ? plan.ipv6! : plan.ipv4, ipv4: plan.ipv4, prevResult: result };
}

export const check = (w: World, s: Sandbox) =>
  cmdCheck(envOf('CHECK', s.id, s.ns.path, s.pod), { ...w.conf, prevResult: s.prevResult }, { host: w.host });
export const del = (w: World, s: Sandbox, host: PluginHost = w.host) =>
  cmdDel(envOf('DEL', s.id, s.ns.path, s.pod), { ...w.conf, prevResult: s.prevResult }, [], { host });
export const gc = (w: World, keep: Sandbox[]) =>
  cmdGc({ ...w.conf, 'cni.dev/valid-attachments': keep.map((s) => ({ containerID: s.id, ifname: 'eth0' })) }, [], {
    host: w.host,
  });

/** The node side of `s` torn down as ipamd applies a spooled DEL (ipamd/cni-exec/spool-applier.ts). */
export const spoolTeardown = (w: World, s: Sandbox) =>
  teardownAttachment({
    vethPrefix: 'eni',
    owner: { containerId: s.id, ifName: 'eth0', pod: { namespace: 'default', name: s.pod } },
    ...(s.ipv4 ? { ipv4: s.ipv4 } : {}),
    node: w.host,
  });

/** The device the node routes `ip` to (`ip route get`), or undefined. */
export async function routeDev(w: World, ip: string): Promise<string | undefined> {
  const r = await ipj(w.node, ['route', 'get', ip]).catch(() => []);
  return r[0]?.dev as string | undefined;
}

/** IPv4 pod rules (prio 512/1536) naming `ip`. */
export const rulesOf = async (w: World, ip: string) =>
  (await ipj(w.node, ['rule', 'show'])).filter((r) => r.dst === ip || r.src === ip);

/**
 * The node reaches `s`: its interface is there, and a TCP connection from the node to a
 * closed port of the pod is refused by the pod's kernel (an RST back through the host
 * veth) within 3 s, where an unreachable pod times out.
 */
export async function reachable(w: World, s: Sandbox): Promise<boolean> {
  const up = await ipIn(s.ns.path, ['link', 'show', 'dev', 'eth0']).then(
    () => true,
    () => false,
  );
  if (!up) return false;
  const script = `exec 3<>/dev/tcp/${s.ip}/9`;
  return new Promise((resolve) =>
    execFile('nsenter', [`--net=${w.node.path}`, 'timeout', '3', 'bash', '-c', script], (err, _out, stderr) =>
      resolve(!err || /Connection refused/.test(stderr)),
    ),
  );
}

/** Waits (deadline 15 s: a loaded machine, an IPv6 address still in DAD) until the node reaches `s`. */
export const assertReachable = (w: World, s: Sandbox, what = `${s.pod} reachable from the node`) =>
  waitFor(what, () => reachable(w, s), 15_000);
