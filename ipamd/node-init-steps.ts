/**
 * The steps of the node init container (CLI in ./node-init.ts): install the CNI shim
 * atomically and set the kernel settings ipamd needs. File I/O only (no child
 * processes), so it runs in an image with nothing but node.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';

/** Loose reverse-path filtering (ip-sysctl.rst: 0 off, 1 strict, 2 loose). */
const RP_FILTER_LOOSE = '2';

/**
 * Copies `shim` to `<binDir>/eni-ipam` through a temp file in `binDir` (mode 0755,
 * fsync, rename). @returns the installed path.
 * @throws Error naming the source or the destination that could not be used.
 */
export async function installShim(shim: string, binDir: string): Promise<string> {
  const dest = path.join(binDir, 'eni-ipam');
  const tmp = path.join(binDir, `.eni-ipam.${process.pid}.tmp`);
  let data: Buffer;
  try {
    data = await fs.readFile(shim);
  } catch (e) {
    throw new Error(`cannot read the CNI shim ${shim} (--shim): ${(e as Error).message}`);
  }
  try {
    const fh = await fs.open(tmp, 'w', 0o755);
    try {
      await fh.writeFile(data);
      await fh.chmod(0o755);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, dest);
  } catch (e) {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    throw new Error(
      `cannot install the CNI shim into ${binDir} (--cni-bin-dir; the host's /opt/cni/bin mount): ${(e as Error).message}`,
    );
  }
  return dest;
}

/**
 * The interface of the main table's IPv4 default route, from `/proc/net/route`
 * (columns Iface, Destination, Gateway, Flags, ..., Mask; hex, host byte order). On
 * EC2 that is the primary ENI. With several default routes, the one with the lowest
 * metric. @throws Error when there is none (name the interface with --primary-if).
 */
export async function primaryInterface(routeFile = '/proc/net/route'): Promise<string> {
  const text = await fs.readFile(routeFile, 'utf8');
  let best: { ifName: string; metric: number } | undefined;
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const [ifName, dest, , , , , metric, mask] = f as [string, string, string, string, string, string, string, string];
    if (dest !== '00000000' || mask !== '00000000') continue;
    const m = Number(metric);
    if (!best || m < best.metric) best = { ifName, metric: m };
  }
  if (!best)
    throw new Error(`no IPv4 default route in ${routeFile}: cannot tell the primary interface; pass --primary-if`);
  return best.ifName;
}

/**
 * Writes `net.ipv4.ip_forward=1` and `rp_filter=2` on `all` and on `ifName` through
 * /proc/sys. @returns the settings written, as `key=value` strings.
 * @throws Error naming the setting that could not be written (read-only /proc/sys:
 * the container is not privileged; no such interface).
 */
export async function setNodeSysctls(ifName: string, procSys = '/proc/sys'): Promise<string[]> {
  if (!/^[^/\s]{1,15}$/.test(ifName) || ifName === '.' || ifName === '..') {
    throw new Error(
      `--primary-if "${ifName}" is invalid: expected a network interface name (1-15 characters, no "/" or spaces)`,
    );
  }
  const settings: [string, string][] = [
    ['net/ipv4/ip_forward', '1'],
    ['net/ipv4/conf/all/rp_filter', RP_FILTER_LOOSE],
    [`net/ipv4/conf/${ifName}/rp_filter`, RP_FILTER_LOOSE],
  ];
  const done: string[] = [];
  for (const [key, value] of settings) {
    const dotted = key.replaceAll('/', '.');
    try {
      await fs.writeFile(path.join(procSys, key), `${value}\n`);
    } catch (e) {
      throw new Error(`cannot set ${dotted}=${value}: ${(e as Error).message} (the init container must be privileged)`);
    }
    done.push(`${dotted}=${value}`);
  }
  return done;
}
