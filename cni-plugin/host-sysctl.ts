/**
 * The per-interface IPv6 sysctls of a host veth (wiring-v6.ts `HOST_VETH_V6_SYSCTLS`),
 * written on the node side: straight to `/proc/sys/net/ipv6/conf/<veth>/` when the node
 * side is this process's netns (the plugin process, a host-network ipamd: microseconds,
 * no process), else with one `nsenter --net=<nodeNetns> sysctl -w` (procps).
 *
 * The chart's ipamd (which runs the plugin's wiring through the exec socket) has only
 * NET_ADMIN/NET_RAW, and its runtime mounts /proc/sys read-only (EROFS). There the writes
 * cannot be made, and what matters of them is checked instead: a pod's router
 * advertisement never configures the node, i.e. the veth's `accept_ra` is 0, or 1 with
 * `forwarding` 1 (ip-sysctl.rst: 1 accepts RAs only when forwarding is off; an IPv6 node
 * forwards: the init container sets `conf/all/forwarding=1`, which new interfaces
 * inherit). `accept_redirects` and the per-interface `forwarding` only shape how the node
 * answers on that link (the node's forwarding is `conf/all/forwarding`), so they are left
 * as inherited there.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import type { NodeSide } from './host.js';
import { executablePath } from '../netfacts/ip-batch.js';
import { HOST_VETH_V6_SYSCTLS } from './wiring-v6.js';

/**
 * Writes the IPv6 sysctls of host veth `veth` on `node`'s side; where /proc/sys is
 * read-only, checks that a router advertisement cannot configure the node (module docstring).
 * @throws Error naming the sysctl when one cannot be written and the check fails (e.g. IPv6
 * disabled on the node, or `accept_ra` 1 with forwarding off on a read-only /proc/sys).
 */
export async function applyHostVethSysctls(veth: string, node: Pick<NodeSide, 'nodeNetns'>): Promise<void> {
  if (!node.nodeNetns) {
    const dir = `/proc/sys/net/ipv6/conf/${veth}`;
    for (const [key, value] of HOST_VETH_V6_SYSCTLS) {
      const file = `${dir}/${key}`;
      try {
        writeFileSync(file, value);
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        if (err.code !== 'EROFS' || raIgnored(dir)) {
          if (err.code === 'EROFS') return;
          throw new Error(`cannot set ${file} to ${value}: ${err.message}`);
        }
        throw new Error(
          `cannot set ${file} to ${value}: ${err.message}; and router advertisements would configure the node ` +
            `(accept_ra ${readConf(dir, 'accept_ra')}, forwarding ${readConf(dir, 'forwarding')}): ` +
            'set net.ipv6.conf.all.forwarding=1 (the init container does with ipFamily ipv6 or dual)',
        );
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

/** One per-interface IPv6 setting under `dir`, trimmed ('?' when unreadable). */
function readConf(dir: string, key: string): string {
  try {
    return readFileSync(`${dir}/${key}`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** True when the interface of `dir` ignores router advertisements: accept_ra 0, or 1 with forwarding 1. */
function raIgnored(dir: string): boolean {
  const ra = readConf(dir, 'accept_ra');
  return ra === '0' || (ra === '1' && readConf(dir, 'forwarding') === '1');
}
