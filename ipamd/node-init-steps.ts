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
 * Copies `src` to `<binDir>/<name>` through a temp file in `binDir` (mode 0755, fsync,
 * rename): a runtime executing it at that moment sees the old file or the new one.
 * @param what names the file and its flag in errors, e.g. "the CNI shim" / "--shim".
 * @returns the installed path. @throws Error naming the source or the destination that could not be used.
 */
async function installExecutable(src: string, binDir: string, name: string, what: [string, string]): Promise<string> {
  const dest = path.join(binDir, name);
  const tmp = path.join(binDir, `.${name}.${process.pid}.tmp`);
  let data: Buffer;
  try {
    data = await fs.readFile(src);
  } catch (e) {
    throw new Error(`cannot read ${what[0]} ${src} (${what[1]}): ${(e as Error).message}`);
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
      `cannot install ${what[0]} into ${binDir} (--cni-bin-dir; the host's /opt/cni/bin mount): ${(e as Error).message}`,
    );
  }
  return dest;
}

/**
 * Copies `shim` to `<binDir>/eni-ipam` through a temp file in `binDir` (mode 0755,
 * fsync, rename). @returns the installed path.
 * @throws Error naming the source or the destination that could not be used.
 */
export function installShim(shim: string, binDir: string): Promise<string> {
  return installExecutable(shim, binDir, 'eni-ipam', ['the CNI shim', '--shim']);
}

/**
 * Installs the plugins ipamd chains after eni-ipam (portmap, bandwidth: Debian's
 * containernetworking-plugins in the image, /usr/lib/cni) into `binDir`, each like
 * {@link installShim}, replacing a file of that name (as aws-node's init does), so the
 * node runs the version the image was tested with (docs/design.md#chained-plugins).
 * @param names plugin file names (letters, digits, `-`, `_`). @returns the installed paths.
 * @throws Error naming the bad name, the missing source or the destination.
 */
export async function installChainedPlugins(srcDir: string, names: string[], binDir: string): Promise<string[]> {
  const out: string[] = [];
  for (const name of names) {
    if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(name))
      throw new Error(`--chained-plugins: "${name}" is not a plugin file name (letters, digits, - and _)`);
    out.push(
      await installExecutable(path.join(srcDir, name), binDir, name, [
        `the chained plugin ${name}`,
        '--chained-plugins-dir',
      ]),
    );
  }
  return out;
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
 * /proc/sys; with `ipv6` (ipamd in `ipv6`/`dual` mode, as amazon-vpc-cni-k8s's init does
 * in IPv6 mode) also `net.ipv6.conf.all.disable_ipv6=0`, `net.ipv6.conf.all.forwarding=1`
 * and `net.ipv6.conf.<ifName>.accept_ra=2` (forwarding on, router advertisements still
 * accepted on the primary interface: ip-sysctl.rst). @returns the settings written, as
 * `key=value` strings.
 * @throws Error naming the setting that could not be written (read-only /proc/sys:
 * the container is not privileged; no such interface).
 */
export async function setNodeSysctls(ifName: string, procSys = '/proc/sys', ipv6 = false): Promise<string[]> {
  if (!/^[^/\s]{1,15}$/.test(ifName) || ifName === '.' || ifName === '..') {
    throw new Error(
      `--primary-if "${ifName}" is invalid: expected a network interface name (1-15 characters, no "/" or spaces)`,
    );
  }
  const settings: [string, string][] = [
    ['net/ipv4/ip_forward', '1'],
    ['net/ipv4/conf/all/rp_filter', RP_FILTER_LOOSE],
    [`net/ipv4/conf/${ifName}/rp_filter`, RP_FILTER_LOOSE],
    ...(ipv6
      ? ([
          ['net/ipv6/conf/all/disable_ipv6', '0'],
          ['net/ipv6/conf/all/forwarding', '1'],
          [`net/ipv6/conf/${ifName}/accept_ra`, '2'],
        ] as [string, string][])
      : []),
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
