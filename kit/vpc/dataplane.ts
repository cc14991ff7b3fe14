/**
 * The simulated VPC's data plane: one "VPC" network namespace where every ENI link of every
 * instance that has a node namespace ends, routing as EC2's state says (kit/vpc/desired.ts).
 *
 * - An ENI attached to a plugged instance is a veth pair: `eth<device index>` in the node
 *   namespace with the ENI's MAC (ipamd finds ENI links by the MAC IMDS gives), and
 *   `i<slot>e<device>` here. A detached or deleted ENI's pair is removed.
 * - Each address and prefix an attached ENI holds is routed to its link, through a next hop
 *   whose neighbour entry is the ENI's MAC (`169.254.255.1` / `fe80::2`, permanent): the
 *   VPC delivers to the interface, as EC2's hypervisor does, whatever the instance answers to
 *   ARP or neighbour discovery. Nothing else is routed: a stale address blackholes.
 * - Source/destination check: a packet arriving on an ENI link from an address that ENI does
 *   not hold is dropped (raw PREROUTING, `rpfilter`, both families), unless EC2 has the
 *   check off for that ENI.
 * - The VPC router: the first host address of each subnet with a plugged ENI on `lo`
 *   (answered by ARP on every link), and `fe80::1` on every link for IPv6.
 *
 * It follows EC2 by polling the simulated cloud's in-process state (every `intervalMs`,
 * default 50) and applying only the difference with `ip -batch`; `sync()` runs one pass now
 * and resolves when the kernel matches the state read at its start.
 */
import { randomUUID } from 'node:crypto';
import type { SimCloud } from '../../sim/index.js';
import { createNamedNetns, run, type Netns } from '../netns.js';
import { desiredPlane, type DesiredLink, type DesiredPlane } from './desired.js';

/** The next hops through which the VPC reaches an ENI (their neighbour entry is the ENI's MAC). */
export const ENI_NEXTHOP_V4 = '169.254.255.1';
export const ENI_NEXTHOP_V6 = 'fe80::2';
/** The VPC router's IPv6 address on every ENI link (a node routes `default via fe80::1`). */
export const VPC_ROUTER_V6 = 'fe80::1';

/** A running data plane. */
export interface VpcDataPlane {
  /** The VPC namespace. */
  netns: Netns;
  /** Plugs instance `instanceId`'s ENIs into `node` from now on (its links appear at the next pass). */
  addInstance(instanceId: string, node: Netns): Promise<void>;
  /** Unplugs an instance: its links go at the next pass (its node namespace is being removed). */
  removeInstance(instanceId: string): Promise<void>;
  /** The node-side link name of ENI `eniId` while it is plugged. */
  linkOf(eniId: string): string | undefined;
  /** One reconcile pass now; resolves when the kernel matches EC2's state as read at its start. @throws Error from `ip`. */
  sync(): Promise<void>;
  /** Stops following EC2 and removes the VPC namespace (every link with it). Idempotent. */
  stop(): Promise<void>;
}

/** What the data plane has applied to the kernel. */
interface Applied {
  links: Map<string, DesiredLink>;
  routes4: Map<string, string>;
  routes6: Map<string, string>;
  gateways: Set<string>;
  exempt: string;
}

/**
 * Creates the VPC namespace `name` and starts following `sim`.
 * @throws Error (after removing the namespace) when its sysctls or rules cannot be set.
 */
export async function startVpcDataPlane(o: {
  sim: SimCloud;
  name: string;
  intervalMs?: number;
}): Promise<VpcDataPlane> {
  const vpc = await createNamedNetns(o.name);
  const nodes = new Map<string, { slot: number; ns: Netns }>();
  let nextSlot = 0;
  // `exempt` starts as no key so the first pass writes the source-check chain.
  const applied: Applied = {
    links: new Map(),
    routes4: new Map(),
    routes6: new Map(),
    gateways: new Set(),
    exempt: '\0',
  };
  const inVpc = (cmd: string, ...args: string[]): Promise<string> =>
    run('nsenter', [`--net=${vpc.path}`, cmd, ...args]);
  try {
    await setUpVpcNamespace(vpc, inVpc);
  } catch (e) {
    await vpc.remove();
    throw e;
  }
  const pass = async (): Promise<void> => {
    const slots = new Map([...nodes].map(([id, n]) => [id, n.slot]));
    const want = desiredPlane(o.sim.state, slots);
    await applyLinks(vpc, nodes, applied, want);
    await applyRoutesAndRouters(vpc, applied, want);
    await applyExemptions(vpc, applied, want);
  };
  let running: Promise<void> | undefined;
  let again = false;
  const sync = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await pass();
      } while (again);
    })().finally(() => {
      running = undefined;
    });
    return running;
  };
  let stopped = false;
  const timer = setInterval(() => void sync().catch(() => undefined), o.intervalMs ?? 50);
  return {
    netns: vpc,
    async addInstance(instanceId, node) {
      if (!nodes.has(instanceId)) nodes.set(instanceId, { slot: nextSlot++, ns: node });
      await sync();
    },
    async removeInstance(instanceId) {
      nodes.delete(instanceId);
      await sync().catch(() => undefined);
    },
    linkOf(eniId) {
      const l = applied.links.get(eniId);
      return l ? `eth${l.deviceIndex}` : undefined;
    },
    sync,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
      await vpc.remove();
    },
  };
}

/** Forwarding on, the VPC router's rules: source/destination check for both families. */
async function setUpVpcNamespace(vpc: Netns, inVpc: (cmd: string, ...a: string[]) => Promise<string>): Promise<void> {
  await run('ip', ['-n', vpc.name, 'link', 'set', 'lo', 'up']);
  for (const kv of [
    'net.ipv4.ip_forward=1',
    'net.ipv6.conf.all.forwarding=1',
    'net.ipv4.conf.all.rp_filter=0',
    'net.ipv4.conf.default.rp_filter=0',
    'net.ipv4.conf.default.proxy_arp=1',
    'net.ipv6.conf.default.accept_dad=0',
  ])
    await inVpc('sysctl', '-qw', kv);
  for (const ipt of ['iptables', 'ip6tables']) {
    await inVpc(ipt, '-w', '-t', 'raw', '-N', 'VPC-SOURCE-CHECK');
    await inVpc(ipt, '-w', '-t', 'raw', '-A', 'PREROUTING', '-j', 'VPC-SOURCE-CHECK');
  }
}

/** Creates the links `want` has and `applied` lacks, removes the ones it no longer has. */
async function applyLinks(
  vpc: Netns,
  nodes: Map<string, { slot: number; ns: Netns }>,
  applied: Applied,
  want: DesiredPlane,
): Promise<void> {
  for (const [id, l] of applied.links) {
    const w = want.links.get(id);
    if (w && w.vpcName === l.vpcName && w.mac === l.mac) continue;
    await run('ip', ['-n', vpc.name, 'link', 'del', l.vpcName]).catch(() => undefined);
    applied.links.delete(id);
    // Routes through a removed link are gone with it.
    for (const m of [applied.routes4, applied.routes6]) for (const [r, e] of m) if (e === id) m.delete(r);
  }
  for (const [id, l] of want.links) {
    if (applied.links.has(id)) continue;
    const node = nodes.get(l.instanceId);
    if (!node) continue;
    const nodeName = `eth${l.deviceIndex}`;
    const tmp = `v${randomUUID().slice(0, 8)}`;
    // Made in the VPC namespace (unique name), then the node end moves and takes its name.
    await run('ip', ['-n', vpc.name, 'link', 'del', l.vpcName]).catch(() => undefined); // a pass cut short left it
    await run('ip', ['-n', vpc.name, 'link', 'add', l.vpcName, 'type', 'veth', 'peer', 'name', tmp]);
    await run('ip', ['-n', vpc.name, 'link', 'set', tmp, 'address', l.mac, 'netns', node.ns.name]);
    await run('ip', ['-n', node.ns.name, 'link', 'set', tmp, 'name', nodeName]);
    await run('ip', ['-n', vpc.name, '-batch', '-'], { input: linkSetup(l) });
    applied.links.set(id, l);
  }
}

/** `ip -batch` lines that bring a VPC link up with its next hops and the IPv6 router address. */
function linkSetup(l: DesiredLink): string {
  return [
    `link set ${l.vpcName} up`,
    `addr add ${VPC_ROUTER_V6}/64 dev ${l.vpcName} nodad`,
    `neigh replace ${ENI_NEXTHOP_V4} lladdr ${l.mac} dev ${l.vpcName} nud permanent`,
    `neigh replace ${ENI_NEXTHOP_V6} lladdr ${l.mac} dev ${l.vpcName} nud permanent`,
    '',
  ].join('\n');
}

/** Routes every address and prefix to its ENI's link, removes the ones no ENI holds; adds the subnet routers. */
async function applyRoutesAndRouters(vpc: Netns, applied: Applied, want: DesiredPlane): Promise<void> {
  const lines: string[] = [];
  const family = (v6: boolean, cur: Map<string, string>, next: Map<string, string>): void => {
    const hop = v6 ? ENI_NEXTHOP_V6 : ENI_NEXTHOP_V4;
    for (const [r] of cur)
      if (!next.has(r) || !applied.links.has(next.get(r)!)) {
        lines.push(`route del ${r}`);
        cur.delete(r);
      }
    for (const [r, eni] of next) {
      const link = applied.links.get(eni);
      if (!link || cur.get(r) === eni) continue;
      lines.push(`route replace ${r} via ${hop} dev ${link.vpcName}${v6 ? '' : ' onlink'}`);
      cur.set(r, eni);
    }
  };
  family(false, applied.routes4, want.routes4);
  family(true, applied.routes6, want.routes6);
  for (const g of want.gateways)
    if (!applied.gateways.has(g)) {
      lines.push(`addr add ${g}/32 dev lo`);
      applied.gateways.add(g);
    }
  if (lines.length) await run('ip', ['-n', vpc.name, '-force', '-batch', '-'], { input: `${lines.join('\n')}\n` });
}

/** Rewrites the source-check chain when the set of ENIs with EC2's check off changed. */
async function applyExemptions(vpc: Netns, applied: Applied, want: DesiredPlane): Promise<void> {
  const exempt = [...want.links.values()]
    .filter((l) => !l.sourceDestCheck)
    .map((l) => l.vpcName)
    .sort();
  const key = exempt.join(',');
  if (key === applied.exempt) return;
  for (const restore of ['iptables-restore', 'ip6tables-restore']) {
    const rules = [
      '*raw',
      ':VPC-SOURCE-CHECK - [0:0]',
      '-F VPC-SOURCE-CHECK',
      ...exempt.map((l) => `-A VPC-SOURCE-CHECK -i ${l} -j RETURN`),
      '-A VPC-SOURCE-CHECK -i i+ -m rpfilter --invert -j DROP',
      'COMMIT',
      '',
    ].join('\n');
    await run('nsenter', [`--net=${vpc.path}`, restore, '-w', '--noflush'], { input: rules });
  }
  applied.exempt = key;
}
