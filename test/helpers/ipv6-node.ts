/**
 * The IPv6-mode test node the IPv6 integration tests share: a dual-stack VPC and subnet in
 * a fresh simulated cloud, ipamd (ENABLE_IPv6=true, ENABLE_IPv4=false, prefix delegation,
 * or dual-stack mode) with the CRI stand-in, and a named node netns (the node's IPv4 on
 * lo, IPv6 forwarding on) that the plugin wires and ipamd's kernel source reads.
 * Everything is removed by `t.after`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createNamedNetns, ipIn, type Netns } from '../../kit/netns.js';
import { createNode } from '../../kit/node-harness.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';
import { SimCloud } from '../../sim/index.js';

const sh = promisify(execFile);

/** The VPC's IPv6 /56 (the subnet gets the first /64 of it). */
export const VPC6 = '2600:1f14:abc:de00::/56';

/** Options of {@link startIpv6Node} beyond ipamd's env. */
export interface Ipv6NodeOptions {
  /** `dual`: ENABLE_IPv4=true as well (dual-stack pods). Default `ipv6`. */
  mode?: 'ipv6' | 'dual';
  /** False: no CRI stand-in (ipamd without a runtime source). Default true. */
  cri?: boolean;
  /** An IPv6 address of the node (a `/128` on the node netns' lo). */
  nodeV6?: string;
  /** Runs after the node netns is ready and before ipamd starts (e.g. an "outside" namespace). */
  beforeStart?: (h: Ipv6Harness, node: Netns) => Promise<void>;
}

/** The node harness {@link startIpv6Node} returns. */
export type Ipv6Harness = Awaited<ReturnType<typeof createNode>>;

/**
 * Starts the node; `name` (≤ 8 chars) names its netns, `ipamdEnv` adds to ipamd's env.
 * @returns the harness (ipamd started), the node netns and the simulated cloud.
 */
export async function startIpv6Node(
  t: { after(fn: () => unknown): void },
  name: string,
  ipamdEnv: Record<string, string> = {},
  o: Ipv6NodeOptions = {},
): Promise<{ h: Ipv6Harness; node: Netns; sim: SimCloud }> {
  ensureDummyAwsCredentials();
  const sim = new SimCloud({ vpcIpv6Cidrs: [VPC6] });
  await sim.start();
  t.after(() => sim.stop());
  const subnetId = sim.addSubnet({ cidr: '10.0.0.0/24', ipv6Cidr: true }).subnetId;
  const h = await createNode({
    sim,
    subnetId,
    ...(o.cri === false ? {} : { cri: { identity: null } }),
    ipamdEnv: {
      ENABLE_IPv6: 'true',
      ENABLE_IPv4: o.mode === 'dual' ? 'true' : 'false',
      ENABLE_PREFIX_DELEGATION: 'true',
      ...ipamdEnv,
    },
  });
  t.after(() => h.close());
  const node = await createNamedNetns(`eni-${name}-node-${process.pid}`);
  t.after(() => node.remove());
  // ipamd's kernel source reads the node netns the plugin wires.
  h.env.ENI_IPAM_CNI_EXEC_NETNS = node.path;
  await ipIn(node.path, ['addr', 'add', `${h.nodeIp}/32`, 'dev', 'lo']);
  if (o.nodeV6) await ipIn(node.path, ['addr', 'add', `${o.nodeV6}/128`, 'dev', 'lo']);
  await sh('nsenter', [
    `--net=${node.path}`,
    'sysctl',
    '-q',
    '-w',
    'net.ipv6.conf.all.forwarding=1',
    'net.ipv4.ip_forward=1',
  ]);
  await o.beforeStart?.(h, node);
  await h.startIpamd();
  return { h, node, sim };
}
