/**
 * The IPv6-mode test node the IPv6 integration tests share: a dual-stack VPC and subnet in
 * a fresh simulated cloud, ipamd (ENABLE_IPv6=true, ENABLE_IPv4=false, prefix delegation)
 * with the CRI stand-in, and a named node netns (the node's IPv4 on lo, IPv6 forwarding on)
 * that the plugin wires and ipamd's kernel source reads. Everything is removed by `t.after`.
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

/**
 * Starts the node; `name` (≤ 8 chars) names its netns, `ipamdEnv` adds to ipamd's IPv6-mode env.
 * @returns the harness (ipamd started) and the node netns.
 */
export async function startIpv6Node(
  t: { after(fn: () => unknown): void },
  name: string,
  ipamdEnv: Record<string, string> = {},
): Promise<{ h: Awaited<ReturnType<typeof createNode>>; node: Netns }> {
  ensureDummyAwsCredentials();
  const sim = new SimCloud({ vpcIpv6Cidrs: [VPC6] });
  await sim.start();
  t.after(() => sim.stop());
  const subnetId = sim.addSubnet({ cidr: '10.0.0.0/24', ipv6Cidr: true }).subnetId;
  const h = await createNode({
    sim,
    subnetId,
    cri: { identity: null },
    ipamdEnv: { ENABLE_IPv6: 'true', ENABLE_IPv4: 'false', ENABLE_PREFIX_DELEGATION: 'true', ...ipamdEnv },
  });
  t.after(() => h.close());
  const node = await createNamedNetns(`eni-${name}-node-${process.pid}`);
  t.after(() => node.remove());
  // ipamd's kernel source reads the node netns the plugin wires.
  h.env.ENI_IPAM_CNI_EXEC_NETNS = node.path;
  await ipIn(node.path, ['addr', 'add', `${h.nodeIp}/32`, 'dev', 'lo']);
  await sh('nsenter', [`--net=${node.path}`, 'sysctl', '-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
  await h.startIpamd();
  return { h, node };
}
