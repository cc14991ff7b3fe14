/**
 * The image's Debian root filesystem, built by Debian's mmdebstrap from the machine's
 * configured apt sources: the Essential set (a shell, coreutils, dpkg: what maintainer
 * scripts and the chart's init commands need), plus the packages of
 * image/debian-packages.txt and what they depend on; no apt, no recommends, no
 * manuals/locales/docs (copyright files kept), no apt caches or host files left behind.
 *
 * The tarball is cached under build/image/cache keyed by everything that goes into it
 * (package list, apt sources, mmdebstrap options and version, timestamp, architecture).
 * The key cannot see the mirror publishing a newer package version: the contents lock
 * (scripts/image/contents.mjs) catches that when the cache is refreshed.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { BUILD_DIR, ImageBuildError, ROOT, pruneCache, run, sha256, withRetries } from './common.mjs';
import { debianMeta } from './debian-meta.mjs';

/** The package list both image builds read (this one and the Dockerfile). */
export const PACKAGES_FILE = path.join(ROOT, 'image', 'debian-packages.txt');

/** The apt sources the machine is configured with (deb822); mmdebstrap copies them in. */
export const DEFAULT_SOURCES = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'];

/**
 * Removed by a customize hook: host files mmdebstrap copies in (the container runtime
 * provides its own) and backup files.
 */
const REMOVE = [
  'etc/hostname', 'etc/resolv.conf', 'etc/hosts',
  'var/cache/debconf/config.dat-old', 'var/cache/debconf/templates.dat-old', 'var/cache/ldconfig/aux-cache',
];

/**
 * Run while apt's lists still exist: the apt metadata of every installed version (its
 * `.deb`'s SHA256 for the SBOM: scripts/image/debian-meta.mjs) into the file the build names
 * in ENI_IPAM_APT_SHOW (mmdebstrap passes the environment to hooks). A version apt no
 * longer lists only loses its hash, so this never fails the build.
 */
const APT_SHOW_HOOK = `dpkg-query --admindir="$1/var/lib/dpkg" -W -f='\${Package}=\${Version}\\n' | xargs env APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-cache show --no-all-versions > "$ENI_IPAM_APT_SHOW" 2>/dev/null || true`;

/** Removed from the tarball after mmdebstrap's own cleanup (which needs them until then): apt's dirs. */
const DELETE_MEMBERS = ['./etc/apt', './var/cache/apt', './var/lib/apt', './var/log/apt'];

/**
 * Reads a package list: one Debian package name a line, `#` comments and blank lines ignored.
 * @param {string} file path
 * @returns {string[]} package names in file order
 * @throws ImageBuildError when the file is missing or a line is not a Debian package name
 */
export function readPackageList(file) {
  let text;
  try { text = readFileSync(file, 'utf8'); } catch (e) {
    throw new ImageBuildError(`cannot read the package list ${file}: ${/** @type {Error} */ (e).message}`);
  }
  const names = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') continue;
    if (!/^[a-z0-9][a-z0-9+.-]+$/.test(line)) {
      throw new ImageBuildError(`${file}:${i + 1}: '${line}' is not a Debian package name (one name a line, lowercase letters, digits, + - .)`);
    }
    names.push(line);
  }
  if (names.length === 0) throw new ImageBuildError(`${file} names no package`);
  return names;
}

/**
 * Parses dpkg's status database into `name=version arch` lines (installed packages only).
 * @param {string} status contents of var/lib/dpkg/status
 * @returns {string[]} sorted lines such as `iproute2=6.1.0-3 amd64`
 */
export function installedPackages(status) {
  const out = [];
  for (const stanza of status.split(/\n\n+/)) {
    const f = Object.fromEntries(stanza.split('\n').filter((l) => /^[A-Za-z-]+: /.test(l)).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]));
    if (f.Package && / installed$/.test(f.Status ?? '')) out.push(`${f.Package}=${f.Version} ${f.Architecture}`);
  }
  return out.sort();
}

/**
 * Builds (or takes from the cache) the Debian root filesystem tarball.
 * @param {{ packagesFile?: string, sourcesFile?: string, debArch: string, epoch: number,
 *   refresh?: boolean, log?: (line: string) => void }} o
 *   debArch: Debian architecture (amd64, arm64); epoch: SOURCE_DATE_EPOCH (s) for mmdebstrap;
 *   refresh: ignore a cached tarball
 * @returns {Promise<{ tar: string, packages: string[], meta: string, cached: boolean }>} the tarball
 *   (paths `./…`, owned by root, no /dev entries), its installed packages (installedPackages)
 *   and the JSON file of each one's license and `.deb` hash (debian-meta.mjs `debianMeta`)
 * @throws ImageBuildError naming the packages and mirror when they cannot be fetched
 */
export async function buildDebianRootfs(o) {
  const packagesFile = o.packagesFile ?? PACKAGES_FILE;
  const packages = readPackageList(packagesFile);
  const sourcesFile = o.sourcesFile ?? DEFAULT_SOURCES.find((f) => existsSync(f));
  if (!sourcesFile) throw new ImageBuildError(`no apt sources found (looked for ${DEFAULT_SOURCES.join(', ')})`);
  const sources = readFileSync(sourcesFile, 'utf8');
  const mirrors = [...new Set([...sources.matchAll(/^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)/gm)].map((m) => m[1]))].join(' ');
  const args = [
    '--variant=essential', `--include=${packages.join(',')}`, `--architectures=${o.debArch}`,
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    '--dpkgopt=path-exclude=/usr/share/man/*', '--dpkgopt=path-exclude=/usr/share/doc/*',
    '--dpkgopt=path-include=/usr/share/doc/*/copyright', '--dpkgopt=path-exclude=/usr/share/locale/*',
    '--dpkgopt=path-exclude=/usr/share/info/*',
    `--customize-hook=${APT_SHOW_HOOK}`,
    `--customize-hook=cd "$1" && rm -f ${REMOVE.join(' ')}`,
    '--skip=output/dev', '--format=tar',
  ];
  const { stdout: version } = await run('mmdebstrap', ['--version'], { what: 'run mmdebstrap' });
  const key = sha256(JSON.stringify(args), DELETE_MEMBERS.join(','), packages.join(','), sources, String(o.epoch), version.trim()).slice(0, 16);
  const cacheDir = path.join(BUILD_DIR, 'cache');
  const tar = path.join(cacheDir, `debian-${o.debArch}-${key}.tar`);
  const list = `${tar}.packages`;
  const meta = `${tar}.meta.json`;
  if (!o.refresh && existsSync(tar) && existsSync(list) && existsSync(meta)) {
    return { tar, packages: readFileSync(list, 'utf8').split('\n').filter(Boolean), meta, cached: true };
  }
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${tar}.tmp`;
  rmSync(tmp, { force: true });
  o.log?.(`mmdebstrap: ${packages.join(' ')} (${o.debArch}) from ${mirrors}`);
  const aptShow = `${tar}.apt-show`;
  const env = { ...process.env, SOURCE_DATE_EPOCH: String(o.epoch), LC_ALL: 'C.UTF-8', ENI_IPAM_APT_SHOW: aptShow };
  try {
    const what = `fetch the Debian packages ${packages.join(', ')} from ${mirrors}`;
    await withRetries('mmdebstrap', () => {
      rmSync(tmp, { force: true });
      // In a private mount namespace: the chroot's /proc and /sys never propagate into the mount
      // namespaces node and cluster harnesses create meanwhile (a copy busy there failed umount).
      const privateNs = ['--mount', '--propagation', 'private'];
      return run('unshare', [...privateNs, 'mmdebstrap', ...args, 'bookworm', tmp, sourcesFile], { env, what });
    }, { log: o.log });
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  await run('tar', ['--delete', `--file=${tmp}`, ...DELETE_MEMBERS], { what: `remove apt's files from ${tmp}` });
  const { stdout: status } = await run('tar', ['-xOf', tmp, './var/lib/dpkg/status'], { what: 'read the package list of the root filesystem' });
  const installed = installedPackages(status);
  writeFileSync(meta, `${JSON.stringify(await debianMeta({ tar: tmp, packages: installed, aptShow }), null, 1)}\n`);
  rmSync(aptShow, { force: true });
  writeFileSync(list, `${installed.join('\n')}\n`);
  renameSync(tmp, tar);
  pruneCache(cacheDir, `debian-${o.debArch}-`, path.basename(tar));
  return { tar, packages: installed, meta, cached: false };
}
