/**
 * The per-interface IPv6 sysctls of a host veth (wiring-v6.ts `HOST_VETH_V6_SYSCTLS`),
 * written on the node side: straight to `/proc/sys/net/ipv6/conf/<veth>/` when the node
 * side is this process's netns (the plugin process, a host-network ipamd: microseconds,
 * no process), else with one `nsenter --net=<nodeNetns> sysctl -w` (procps).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import type { NodeSide } from './host.js';
import { executablePath } from '../netfacts/ip-batch.js';
import { HOST_VETH_V6_SYSCTLS } from './wiring-v6.js';

/**
 * Writes the IPv6 sysctls of host veth `veth` on `node`'s side.
 * @throws Error naming the sysctl when one cannot be written (e.g. IPv6 disabled on the node).
 */
export async function applyHostVethSysctls(veth: string, node: Pick<NodeSide, 'nodeNetns'>): Promise<void> {
  if (!node.nodeNetns) {
    for (const [key, value] of HOST_VETH_V6_SYSCTLS) {
      const file = `/proc/sys/net/ipv6/conf/${veth}/${key}`;
      try {
        writeFileSync(file, value);
      } catch (e) {
        throw new Error(`cannot set ${file} to ${value}: ${(e as Error).message}`);
      }
    }
    return;
  }
  const args = [
    `--net=${node.nodeNetns}`,
    'sysctl',
    '-q',
    '-w',
    ...HOST_VETH_V6_SYSCTLS.map(([k, v]) => `net.ipv6.conf.${veth}.${k}=${v}`),
  ];
  await new Promise<void>((resolve, reject) => {
    execFile(executablePath('nsenter'), args, (err, _out, stderr) =>
      err ? reject(new Error(`nsenter sysctl for ${veth}: ${stderr.trim() || err.message}`)) : resolve(),
    );
  });
}
