/**
 * The node's side of the support bundle: the CNI configuration directory (every file, as
 * upstream's support script copied `/etc/cni/net.d/*`), the kernel settings ipamd relies on
 * as the node's network namespace shows them, and the kubelet's and containerd's logs.
 *
 * Where those logs are on an EKS node: Amazon Linux 2 and 2023 run the kubelet and
 * containerd as systemd units logging to the journal; EKS's own log collector
 * (awslabs/amazon-eks-ami, log-collector-script/linux/eks-log-collector.sh, which
 * amazon-vpc-cni-k8s's `aws-cni-support.sh` was replaced by) reads them with
 * `journalctl --unit=kubelet --since <10 days ago>` and `journalctl -u containerd`. So does
 * this, the last 10 days, through the node's own journalctl: run on the node, or with
 * `hostRoot` (the node's root mounted in a debug pod, `kubectl debug node/<n>
 * --profile=sysadmin` mounts it at /host) as `chroot <hostRoot> journalctl …`. A kubelet or
 * containerd that logs to a file is read from the file instead (`kubeletLog`,
 * `containerdLog`: the last 64 MiB). Each part that cannot be read is noted, saying what to
 * run instead; none stops the bundle.
 */
import { execFile, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { copyFile, mkdir, open, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

/** One part of the bundle: its file name and whether it was collected (`error`: why not, one line). */
export interface BundlePart {
  file: string;
  ok: boolean;
  error?: string;
}

/** Where the node's facts are read from. */
export interface NodeSources {
  /** The CNI configuration directory to copy (every regular file in it). */
  cniConfDir: string;
  /** The node's root filesystem, when the CLI runs beside it (a debug pod): journalctl runs chrooted there. */
  hostRoot?: string;
  /** A journal directory to read instead of the system journal (`journalctl --directory`; inside hostRoot when set). */
  journalDir?: string;
  /** The kubelet's log file, when it logs to one instead of the journal. */
  kubeletLog?: string;
  /** containerd's log file, likewise. */
  containerdLog?: string;
  /** Network namespace (path) the node's sysctls are read in; undefined: the CLI's own. */
  netns?: string;
  /** Deadline of each journal read, ms. */
  timeoutMs: number;
}

/**
 * The sysctl files ipamd relies on, by base name, under /proc/sys/net: `ip_forward` and every
 * interface's `rp_filter` (checked by ipamd: ipamd/network/sysctl.ts), IPv4 and IPv6
 * `forwarding`, `disable_ipv6` and `accept_ra` (set by the init container in IPv6 modes:
 * ipamd/node-init-steps.ts `setNodeSysctls`).
 */
export const RELIED_ON_SYSCTLS = ['ip_forward', 'rp_filter', 'forwarding', 'disable_ipv6', 'accept_ra'];

/** How far back the journal is read: as EKS's log collector does. */
export const JOURNAL_SINCE = '-10d';

/** Bytes kept from the end of a runtime log file. */
const LOG_TAIL_BYTES = 64 << 20;

const run = promisify(execFile);
const errLine = (e: unknown) => ((e as Error).message ?? String(e)).split('\n')[0]!;

/**
 * `grep -r -H` output (`/proc/sys/net/ipv4/conf/eth0/rp_filter:2`) as `sysctl -a` lines
 * (`net.ipv4.conf.eth0.rp_filter = 2`), sorted.
 */
export function sysctlLines(grepOut: string): string {
  return (
    grepOut
      .split('\n')
      .filter((l) => l.startsWith('/proc/sys/'))
      .map((l) => {
        const at = l.indexOf(':');
        return `${l.slice('/proc/sys/'.length, at).replaceAll('/', '.')} = ${l.slice(at + 1)}`;
      })
      .sort()
      .join('\n') + '\n'
  );
}

/** Copies every regular file of the CNI configuration directory to `<dir>/node/cni-net.d/`. */
async function cniConf(dir: string, src: string, parts: BundlePart[]): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(src)).sort();
  } catch (e) {
    parts.push({ file: 'node/cni-net.d/', ok: false, error: `${src}: ${errLine(e)}` });
    return;
  }
  await mkdir(path.join(dir, 'node', 'cni-net.d'), { recursive: true });
  for (const n of names) {
    const file = `node/cni-net.d/${n}`;
    try {
      if (!(await stat(path.join(src, n))).isFile()) continue;
      await copyFile(path.join(src, n), path.join(dir, file));
      parts.push({ file, ok: true });
    } catch (e) {
      parts.push({ file, ok: false, error: errLine(e) });
    }
  }
  if (!names.length)
    parts.push({ file: 'node/cni-net.d/', ok: false, error: `${src} is empty: no conflist installed` });
}

/** The relied-on sysctls of every interface, in `netns` when given. Exit 2 (an unreadable file) keeps what was read. */
async function sysctls(dir: string, netns: string | undefined, parts: BundlePart[]): Promise<void> {
  const file = 'node/sysctls.txt';
  const argv = [
    'grep',
    '-r',
    '-H',
    ...RELIED_ON_SYSCTLS.map((n) => `--include=${n}`),
    '',
    '/proc/sys/net/ipv4/ip_forward',
    '/proc/sys/net/ipv4/conf',
    '/proc/sys/net/ipv6/conf',
  ];
  const full = netns ? ['nsenter', `--net=${netns}`, ...argv] : argv;
  let out: string;
  try {
    out = (await run(full[0]!, full.slice(1), { maxBuffer: 16 << 20 })).stdout;
  } catch (e) {
    out = (e as { stdout?: string }).stdout ?? '';
    if (!out.includes('/proc/sys/net/ipv4/ip_forward:')) {
      parts.push({ file, ok: false, error: errLine(e) });
      return;
    }
  }
  await mkdir(path.join(dir, 'node'), { recursive: true });
  await writeFile(path.join(dir, file), sysctlLines(out));
  parts.push({ file, ok: true });
}

/** Runs argv with stdout into `file`; rejects with the first stderr line on a non-zero exit, a missing tool or the deadline. */
function runToFile(argv: string[], file: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(file);
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stderr = '';
    child.stdout.pipe(out);
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()).length > 4096 && (stderr = stderr.slice(0, 4096)));
    child.on('error', (e) => reject(e));
    child.on('close', (code, signal) => {
      out.end(() => {
        if (code === 0) resolve();
        else
          reject(
            new Error(
              signal
                ? `${argv[0]} did not finish within ${timeoutMs} ms`
                : stderr.trim().split('\n')[0] || `exit ${code}`,
            ),
          );
      });
    });
  });
}

/** Copies the last LOG_TAIL_BYTES of `src` to `dst`. */
async function tailCopy(src: string, dst: string): Promise<void> {
  const f = await open(src, 'r');
  try {
    const { size } = await f.stat();
    const len = Math.min(size, LOG_TAIL_BYTES);
    const buf = Buffer.alloc(len);
    await f.read(buf, 0, len, size - len);
    await writeFile(dst, buf);
  } finally {
    await f.close();
  }
}

/** One runtime component's log: its file when given, else its journal unit. */
async function runtimeLog(
  dir: string,
  unit: 'kubelet' | 'containerd',
  fileSrc: string | undefined,
  s: NodeSources,
  parts: BundlePart[],
): Promise<{ file: string; from: string }> {
  const file = `node/${unit}.log`;
  await mkdir(path.join(dir, 'node'), { recursive: true });
  const dst = path.join(dir, file);
  const flag = `--${unit}-log`;
  if (fileSrc) {
    try {
      await tailCopy(fileSrc, dst);
      parts.push({ file, ok: true });
    } catch (e) {
      parts.push({ file, ok: false, error: `${fileSrc} (${flag}): ${errLine(e)}` });
    }
    return { file, from: `${fileSrc} (${flag}, last ${LOG_TAIL_BYTES >> 20} MiB)` };
  }
  const journal = [
    'journalctl',
    `--unit=${unit}`,
    `--since=${JOURNAL_SINCE}`,
    '--no-pager',
    '--output=short-iso-precise',
    ...(s.journalDir ? [`--directory=${s.journalDir}`] : []),
  ];
  const argv = s.hostRoot ? ['chroot', s.hostRoot, ...journal] : journal;
  try {
    await runToFile(argv, dst, Math.max(s.timeoutMs, 60_000));
    parts.push({ file, ok: true });
  } catch (e) {
    const missing = (e as NodeJS.ErrnoException).code === 'ENOENT';
    parts.push({
      file,
      ok: false,
      error: missing
        ? `${argv[0]} is not installed where the CLI runs (in the eni-ipam container there is no journal): run it on the node, in \`kubectl debug node/<node> --profile=sysadmin\` with --host-root /host, or save \`journalctl -u ${unit} --since ${JOURNAL_SINCE}\` on the node and pass it as ${flag}`
        : `${argv.join(' ')}: ${errLine(e)}`,
    });
  }
  return { file, from: argv.join(' ') };
}

/**
 * Writes the node's parts under `dir`.
 * @returns where each runtime log came from (for MANIFEST.json)
 */
export async function collectNode(
  dir: string,
  s: NodeSources,
  parts: BundlePart[],
): Promise<{ cniConfDir: string; kubelet: string; containerd: string }> {
  await cniConf(dir, s.cniConfDir, parts);
  await sysctls(dir, s.netns, parts);
  const kubelet = await runtimeLog(dir, 'kubelet', s.kubeletLog, s, parts);
  const containerd = await runtimeLog(dir, 'containerd', s.containerdLog, s, parts);
  return { cniConfDir: s.cniConfDir, kubelet: kubelet.from, containerd: containerd.from };
}
