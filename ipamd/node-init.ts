#!/usr/bin/env node
/**
 * eni-ipam node init: what the DaemonSet's privileged init container runs
 * (`node /app/dist/ipamd/node-init.js`) before ipamd starts, so that ipamd itself needs
 * only NET_ADMIN/NET_RAW (docs/design.md#8-lessons-the-field-paid-for: /proc/sys is read-only in an unprivileged container).
 *
 * 1. Installs the native CNI shim into the host's CNI bin dir: copied to a temp file in
 *    that dir, mode 0755, fsynced, then renamed over `eni-ipam`, so a runtime executing
 *    the plugin at that moment sees the old file or the new one, never half of one.
 * 2. Installs the CNI plugins ipamd chains after eni-ipam (`portmap`, `bandwidth`, from
 *    Debian's containernetworking-plugins in the image) the same way, over any file of
 *    that name (docs/design.md#chained-plugins).
 * 3. Sets the kernel settings ipamd checks (docs/design.md#7-host-networking), in the host network namespace
 *    (the pod has hostNetwork): `net.ipv4.ip_forward=1`, and loose reverse-path
 *    filtering (`rp_filter=2`, ip-sysctl.rst; RFC 3704) on `all` and on the primary
 *    interface. The kernel uses max(all, <if>), so both are set. With `--ipv6` (ipamd in
 *    `ipv6`/`dual` mode): `net.ipv6.conf.all.disable_ipv6=0`, `net.ipv6.conf.all.forwarding=1`
 *    and `accept_ra=2` on the primary interface.
 *
 * Arguments: `--shim PATH` (default /app/dist/cni-plugin/eni-ipam), `--cni-bin-dir DIR`
 * (default /host/opt/cni/bin), `--chained-plugins-dir DIR` (default /usr/lib/cni),
 * `--chained-plugins a,b` (default portmap,bandwidth; empty: none), `--primary-if NAME` (default: the interface of the main
 * table's IPv4 default route, read from /proc/net/route), `--skip-sysctls`, `--ipv6`.
 * Exit 0 when all is done; 1 with one line naming what failed; 3 on bad arguments.
 */
import { parseArgs } from 'node:util';
import { installChainedPlugins, installShim, primaryInterface, setNodeSysctls } from './node-init-steps.js';

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      strict: true,
      allowPositionals: false,
      options: {
        shim: { type: 'string', default: '/app/dist/cni-plugin/eni-ipam' },
        'cni-bin-dir': { type: 'string', default: '/host/opt/cni/bin' },
        'chained-plugins-dir': { type: 'string', default: '/usr/lib/cni' },
        'chained-plugins': { type: 'string', default: 'portmap,bandwidth' },
        'primary-if': { type: 'string' },
        'skip-sysctls': { type: 'boolean', default: false },
        ipv6: { type: 'boolean', default: false },
      },
    }));
  } catch (e) {
    process.stderr.write(`eni-ipam-node-init: ${(e as Error).message}\n`);
    process.exit(3);
  }
  try {
    const dest = await installShim(values.shim, values['cni-bin-dir']);
    process.stdout.write(`eni-ipam-node-init: installed ${dest}\n`);
    const names = values['chained-plugins'].split(',').filter((n) => n !== '');
    for (const p of await installChainedPlugins(values['chained-plugins-dir'], names, values['cni-bin-dir']))
      process.stdout.write(`eni-ipam-node-init: installed ${p}\n`);
    if (!values['skip-sysctls']) {
      const ifName = values['primary-if'] ?? (await primaryInterface());
      const set = await setNodeSysctls(ifName, '/proc/sys', values.ipv6);
      process.stdout.write(`eni-ipam-node-init: ${set.join(', ')}\n`);
    }
  } catch (e) {
    process.stderr.write(`eni-ipam-node-init: ${(e as Error).message}\n`);
    process.exit(1);
  }
}

void main();
