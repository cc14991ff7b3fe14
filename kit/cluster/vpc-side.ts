/**
 * A VPC client for the NodePort step (docs/real-cluster.md#nodeport): an address in the VPC
 * CIDR (outside the node's subnet) on the VPC namespace's `lo`, from which a test connects to
 * a node's primary IP. The VPC data plane (kit/vpc/dataplane.ts) routes the node's primary IP
 * to its primary ENI and drops, as EC2's source/destination check does, a packet from that IP
 * arriving on any other ENI's link: a reply that leaves through the wrong ENI never reaches
 * the client.
 *
 * Also here: a NodePort Service for one pod, the counters the step reads (link tx packets,
 * the connection-mark rule's packets) and ipamd's metrics, all read inside the node.
 */
import { CONNMARK_COMMENT } from '../../netfacts/connmark.js';
import { run } from '../netns.js';
import { vpcPeerAddress } from '../vpc/peer.js';
import type { TestCluster } from './cluster.js';

/** A VPC client in place; `undo()` removes its address (idempotent, never throws). */
export interface VpcSide {
  /** The client's address (in the VPC's primary CIDR, outside the node's subnet). */
  client: string;
  undo(): Promise<void>;
}

/**
 * Adds the VPC client to `c.vpcNetns`. Its address is the VPC CIDR's last address minus 9
 * (e.g. 10.0.255.246 in 10.0.0.0/16).
 * @throws Error when that address falls in a node's subnet, or from `ip`.
 */
export async function strictVpcSide(c: TestCluster): Promise<VpcSide> {
  const client = vpcPeerAddress(c.sim.state);
  const ip = (...a: string[]): Promise<string> => run('ip', ['-n', c.vpcNetns.name, ...a]);
  await ip('addr', 'add', `${client}/32`, 'dev', 'lo');
  let done = false;
  return {
    client,
    async undo() {
      if (done) return;
      done = true;
      await ip('addr', 'del', `${client}/32`, 'dev', 'lo').catch(() => undefined);
    },
  };
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
