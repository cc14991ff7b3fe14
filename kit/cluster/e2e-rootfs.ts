/**
 * The Debian root filesystem the e2e suite's Debian-based images share (agnhost,
 * glibc-dns-testing, nginx; busybox takes its one binary from it): Debian 12 `minbase`
 * (as `debian:bookworm-slim`) from the machine's apt sources by mmdebstrap, plus the tools
 * the network tests exec inside their pods. The upstream agnhost image is Alpine with
 * `bind-tools curl netcat-openbsd iproute2 iperf bash`; these are their Debian packages
 * (test/images/agnhost/Dockerfile in k8s.io/kubernetes v1.36.3).
 *
 * One tarball, cached under the e2e image cache keyed by the package list, the hooks, the
 * apt sources, mmdebstrap's version and the timestamp, so every image built from it has
 * the same base layer (containerd stores it once). The key cannot see the mirror publishing
 * a newer package version: delete the cache entry to take it.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The packages on top of minbase, and why each is there. */
export const E2E_DEBIAN_PACKAGES: Record<string, string> = {
  curl: 'the Services and Networking tests exec `curl` in agnhost pods',
  'netcat-openbsd': '`nc` for the UDP and TCP probes (agnhost image: netcat-openbsd)',
  dnsutils: '`dig` and `nslookup` of the DNS tests (agnhost: bind-tools; glibc-dns-testing: dnsutils)',
  iproute2: '`ip` and `ss` (agnhost: iproute2)',
  iperf: 'iperf 2 (agnhost: iperf)',
  wget: '`wget -q -O -` of the Services tests (busybox wget in the Alpine image)',
  'nginx-light': 'the nginx image of the Endpoints and EndpointSlice tests',
  'busybox-static': 'the busybox image (its one static binary)',
};

/**
 * Run inside the root by mmdebstrap: the user and group the agnhost image defines
 * (`user-defined-in-image` 1000 in `group-defined-in-image` 50000), and the host files the
 * runtime provides removed.
 */
const CUSTOMIZE_HOOKS = [
  'chroot "$1" groupadd -g 50000 group-defined-in-image',
  'chroot "$1" useradd -u 1000 -G group-defined-in-image -M -s /bin/sh user-defined-in-image',
  'cd "$1" && rm -f etc/hostname etc/resolv.conf etc/hosts var/cache/ldconfig/aux-cache',
];

/** The apt sources files mmdebstrap may copy (deb822 first), as the eni-ipam image build. */
const SOURCES = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'];

/** A built root filesystem. */
export interface E2eRootfs {
  /** The tarball (paths `./…`, no /dev entries). */
  tar: string;
  /** `mmdebstrap` options it was made with, for an image's history. */
  createdBy: string;
  /** True when it came from the cache. */
  cached: boolean;
}

/**
 * Builds (or takes from `cacheDir`) the shared Debian root filesystem.
 * @param o.epoch SOURCE_DATE_EPOCH (s) for mmdebstrap: file times and the package database.
 * @throws Error naming mmdebstrap's failure (the packages and mirror) in one line.
 */
export async function buildE2eRootfs(o: { cacheDir: string; epoch: number; arch: string }): Promise<E2eRootfs> {
  const sourcesFile = SOURCES.find((f) => existsSync(f));
  if (!sourcesFile) throw new Error(`no apt sources found (looked for ${SOURCES.join(', ')})`);
  const packages = Object.keys(E2E_DEBIAN_PACKAGES);
  const args = [
    '--variant=minbase',
    `--include=${packages.join(',')}`,
    `--architectures=${o.arch}`,
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    '--dpkgopt=path-exclude=/usr/share/man/*',
    '--dpkgopt=path-exclude=/usr/share/doc/*',
    '--dpkgopt=path-include=/usr/share/doc/*/copyright',
    '--dpkgopt=path-exclude=/usr/share/locale/*',
    ...CUSTOMIZE_HOOKS.map((h) => `--customize-hook=${h}`),
    '--skip=output/dev',
    '--format=tar',
  ];
  let version: string;
  try {
    version = (await run('mmdebstrap', ['--version'])).stdout.trim();
  } catch {
    throw new Error('mmdebstrap is not installed (run: bash scripts/ensure-deps.sh --image)');
  }
  const key = createHash('sha256')
    .update(JSON.stringify([args, readFileSync(sourcesFile, 'utf8'), version, o.epoch]))
    .digest('hex')
    .slice(0, 16);
  const tar = path.join(o.cacheDir, `e2e-debian-${o.arch}-${key}.tar`);
  const createdBy = `mmdebstrap --variant=minbase --include=${packages.join(',')} bookworm`;
  if (existsSync(tar)) return { tar, createdBy, cached: true };
  await mkdir(o.cacheDir, { recursive: true });
  const tmp = `${tar}.tmp-${process.pid}`;
  try {
    // In a private mount namespace: the chroot's /proc and /sys never propagate into the mount
    // namespaces node and cluster harnesses create meanwhile (a copy busy there failed umount).
    await run('unshare', ['--mount', '--propagation', 'private', 'mmdebstrap', ...args, 'bookworm', tmp, sourcesFile], {
      env: { ...process.env, SOURCE_DATE_EPOCH: String(o.epoch), LC_ALL: 'C.UTF-8' },
      maxBuffer: 64 << 20,
    });
  } catch (e) {
    await rm(tmp, { force: true });
    const err = ((e as { stderr?: string }).stderr ?? (e as Error).message)
      .split('\n')
      .filter((l) => /^(E: |W: Failed to fetch)|error/i.test(l))[0];
    throw new Error(`mmdebstrap of ${packages.join(', ')} failed: ${err ?? (e as Error).message.split('\n')[0]}`);
  }
  await rename(tmp, tar);
  return { tar, createdBy, cached: false };
}
