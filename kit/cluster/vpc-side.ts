/**
 * The cluster's "VPC side" for the NodePort step (docs/real-cluster.md#nodeport): the
 * namespace holding the far end (`vpc<device>`) of every ENI link becomes a VPC client and
 * router that enforces EC2's source/dest check, as test/integration/host-network-nodeport
 * does with bridges. It owns a client address in the VPC CIDR (outside the node's subnet)
 * and the subnet gateway(s) the node's ENI tables route through, reaches the node's
 * primary IP only through `vpc0` (the primary ENI), and runs strict rp_filter: a packet
 * from the node's primary IP arriving on a secondary ENI's link is dropped, so a reply
 * that leaves through the wrong ENI never reaches the client.
 *
 * Also here: a NodePort Service for one pod, the counters the step reads (link tx packets,
 * the connection-mark rule's packets) and ipamd's metrics, all read inside the node.
 */
import ipaddr from 'ipaddr.js';
import { CONNMARK_COMMENT } from '../../netfacts/connmark.js';
import { subnetGateway } from '../../ipamd/network/eni-links.js';
import { vpcCidrBlocks } from '../../sim/index.js';
import { run } from '../netns.js';
import type { TestCluster } from './cluster.js';

/** A strict VPC side in place; `undo()` removes its addresses and routes (idempotent, never throws). */
export interface VpcSide {
  /** The client's address (in the VPC's primary CIDR, outside the node's subnet). */
  client: string;
  /** The subnet gateways answered on every ENI link. */
  gateways: string[];
  undo(): Promise<void>;
}

/**
 * Makes `c.vpcNetns` the strict VPC side described above. The client address is the VPC
 * CIDR's last address minus 9 (e.g. 10.0.255.246 in 10.0.0.0/16).
 * @throws Error when that address falls in the node's subnet, or from `ip`/`sysctl`.
 */
export async function strictVpcSide(c: TestCluster): Promise<VpcSide> {
  // A VPC block is /16../28, so its last octet is at least 15 and minus 9 stays in the block.
  const bytes = ipaddr.IPv4.broadcastAddressFromCIDR(vpcCidrBlocks(c.sim.state)[0]!).toByteArray();
  bytes[3] = bytes[3]! - 9;
  const client = ipaddr.fromByteArray(bytes);
  const subnetCidrs = new Set<string>();
  for (const e of c.sim.state.enis.values())
    if (e.attachment?.instanceId === c.node.instanceId) subnetCidrs.add(c.sim.state.subnets.get(e.subnetId)!.cidr);
  for (const s of subnetCidrs)
    if (client.match(ipaddr.parseCIDR(s))) throw new Error(`VPC client ${client.toString()} is inside subnet ${s}`);
  const gateways = [...subnetCidrs].map(subnetGateway);
  const ns = c.vpcNetns;
  const ip = (...a: string[]): Promise<string> => run('ip', ['-n', ns.name, ...a]);
  const added: string[][] = [];
  const undo = async (): Promise<void> => {
    for (const a of added.reverse()) await ip(...a).catch(() => undefined);
    added.length = 0;
  };
  try {
    // EC2's source/dest check: strict reverse-path filtering on every ENI link, now and later.
    // ARP for the client and the gateways (on lo) answered on every link, as the VPC's router does.
    for (const k of ['all', 'default', ...(await vpcLinks(c))])
      for (const kv of ['rp_filter=1', 'arp_ignore=0'])
        await run('nsenter', [`--net=${ns.path}`, 'sysctl', '-qw', `net/ipv4/conf/${k}/${kv}`]);
    for (const a of [client.toString(), ...gateways]) {
      await ip('addr', 'add', `${a}/32`, 'dev', 'lo');
      added.push(['addr', 'del', `${a}/32`, 'dev', 'lo']);
    }
    await ip('route', 'add', `${c.nodeIp}/32`, 'dev', 'vpc0', 'src', client.toString());
    added.push(['route', 'del', `${c.nodeIp}/32`, 'dev', 'vpc0']);
  } catch (e) {
    await undo();
    throw e;
  }
  return { client: client.toString(), gateways, undo };
}

/** The `vpc<device>` links in the VPC namespace. */
async function vpcLinks(c: TestCluster): Promise<string[]> {
  const links = JSON.parse((await run('ip', ['-n', c.vpcNetns.name, '-j', 'link', 'show'])) || '[]') as Array<{
    ifname: string;
  }>;
  return links.map((l) => l.ifname).filter((n) => /^vpc\d+$/.test(n));
}

/** A NodePort Service `name` in `default` to the pods labelled `nodeport=<name>`, port 80 → `targetPort`. */
export function nodePortService(name: string, nodePort: number, targetPort: number): object {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default' },
    spec: {
      type: 'NodePort',
      selector: { nodeport: name },
      ports: [{ port: 80, targetPort, nodePort, protocol: 'TCP' }],
    },
  };
}

/** tx packets of each node link in `devs` (`ip -s link`), read inside the node. */
export async function nodeTxPackets(c: TestCluster, devs: string[]): Promise<Record<string, number>> {
  const links = JSON.parse((await run('ip', ['-n', c.nodeNetns.name, '-s', '-j', 'link', 'show'])) || '[]') as Array<{
    ifname: string;
    stats64: { tx: { packets: number } };
  }>;
  return Object.fromEntries(devs.map((d) => [d, Number(links.find((l) => l.ifname === d)?.stats64.tx.packets ?? -1)]));
}

/**
 * Packets counted by ipamd's connection-mark rule on `primaryIf` (mangle PREROUTING,
 * comment {@link CONNMARK_COMMENT}), from whichever iptables backend holds it; -1 when absent.
 */
export async function markRulePackets(c: TestCluster, primaryIf = 'eth0'): Promise<number> {
  for (const save of ['iptables-nft-save', 'iptables-legacy-save']) {
    const out = await run('nsenter', [`--net=${c.nodeNetns.path}`, save, '-c', '-t', 'mangle']).catch(() => '');
    const line = out
      .split('\n')
      .find((l) => l.includes(`"${CONNMARK_COMMENT}"`) && l.includes(`-i ${primaryIf} `) && l.includes('CONNMARK'));
    const m = line?.match(/^\[(\d+):\d+\]/);
    if (m) return Number(m[1]);
  }
  return -1;
}

/** ipamd's Prometheus text (`GET 127.0.0.1:<port>/metrics` inside the node). @throws Error when curl fails. */
export const ipamdMetrics = (c: TestCluster, port = 61678): Promise<string> =>
  run('nsenter', [`--net=${c.nodeNetns.path}`, 'curl', '-sf', '--max-time', '5', `http://127.0.0.1:${port}/metrics`]);

/** The value of the sample `name{labels}` exactly as written in Prometheus text `text`, or undefined. */
export function metricValue(text: string, sample: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.slice(sample.length + 1));
}
