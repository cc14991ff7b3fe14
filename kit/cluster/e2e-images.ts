/**
 * The images Kubernetes' network e2e tests run, built here with no registry and imported
 * into a node's containerd under the exact names the suite asks for
 * (k8s.io/kubernetes test/utils/image/manifest.go, v1.36.3), so nothing is ever pulled:
 *
 * - Go programs from their modules (cluster/build.sh `e2e` and `coredns`): agnhost, CoreDNS;
 * - Debian 12 packages (e2e-rootfs.ts: mmdebstrap minbase and the tools the tests exec);
 * - the static C pause of kit/pause-image.ts.
 *
 * Layers are reproducible tarballs (scripts/image/oci.mjs: sorted names, fixed times, owner
 * root) assembled by umoci into OCI archives, cached under the e2e image cache keyed by
 * every input (the binaries' contents, the root filesystem's key, the image config).
 * What each image holds, and how it differs from upstream's, is in docs/conformance.md.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readdir, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildPauseImage } from '../pause-image.js';
import { buildE2eRootfs, type E2eRootfs } from './e2e-rootfs.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Where the image archives and the root filesystem are cached (ENI_IPAM_E2E_IMAGE_CACHE overrides). */
export const E2E_IMAGE_CACHE = process.env['ENI_IPAM_E2E_IMAGE_CACHE'] || '/var/cache/eni-ipam/e2e-images';
/** Timestamp (s) of every file and of the image configs: 2026-01-01, as the cluster binaries' buildDate. */
const EPOCH = 1767225600;
/** Bump when the recipes change in a way the inputs do not show. */
const RECIPE_VERSION = 1;
const E2E_REGISTRY = 'registry.k8s.io/e2e-test-images';

/** One image the suite asks for. */
export interface E2eImageSpec {
  id: 'agnhost' | 'glibc-dns-testing' | 'nginx' | 'busybox' | 'pause' | 'coredns';
  /** The names the suite (or the cluster) asks for; the first is the archive's, the rest are tags of it. */
  refs: string[];
  /** Which tests need it (the one line printed when it cannot be built). */
  neededBy: string;
}

/** Every image built, in build order. */
export const E2E_IMAGES: E2eImageSpec[] = [
  {
    id: 'agnhost',
    refs: [`${E2E_REGISTRY}/agnhost:2.63.0`, `${E2E_REGISTRY}/agnhost:2.55`],
    neededBy: 'most [sig-network] tests (netexec and exec pods, Services, Networking Granular Checks, HostPort, DNS)',
  },
  {
    id: 'glibc-dns-testing',
    refs: [`${E2E_REGISTRY}/glibc-dns-testing:2.0.0`],
    neededBy: 'the DNS tests (the glibc "jessie" prober)',
  },
  {
    id: 'nginx',
    refs: [`${E2E_REGISTRY}/nginx:1.15-4`, `${E2E_REGISTRY}/nginx:1.27-0`],
    neededBy: 'the Endpoints and EndpointSlice tests',
  },
  { id: 'busybox', refs: [`${E2E_REGISTRY}/busybox:1.37.0-1`], neededBy: 'the Conntrack tests and framework pods' },
  { id: 'pause', refs: ['registry.k8s.io/pause:3.10.2'], neededBy: 'Service endpoints latency' },
  { id: 'coredns', refs: ['registry.k8s.io/coredns/coredns:v1.14.2'], neededBy: 'the cluster DNS (kube-dns)' },
];

/** Images of the suite not built here, with the tests that use them (none in the conformance focus). */
export const UNBUILT_E2E_IMAGES: Array<{ ref: string; neededBy: string }> = [
  {
    ref: 'registry.k8s.io/build-image/distroless-iptables:v0.9.6',
    neededBy: '[sig-network] KubeProxy should set TCP CLOSE_WAIT timeout [Privileged]',
  },
];

/** A built image archive and the names it goes under. */
export interface BuiltE2eImage {
  id: E2eImageSpec['id'];
  refs: string[];
  archive: string;
}

/** What {@link buildE2eImages} made and what it could not. */
export interface E2eImageSet {
  built: BuiltE2eImage[];
  /** One line per image that failed: `<ref>: cannot build (needed by …): <why>`. */
  failed: string[];
}

/** Inputs: the bin dirs of cluster/build.sh's `e2e` (agnhost) and `coredns` parts. */
export interface E2eImageInputs {
  e2eBin: string;
  corednsBin: string;
  cacheDir?: string;
}

interface OciModule {
  packLayer(o: { dir: string; paths: string[]; out: string; epoch: number }): Promise<string>;
  writeOciArchive(o: {
    layoutDir: string;
    out: string;
    tag: string;
    name: string;
    epoch: number;
    arch: string;
    layers: Array<{ tar: string; createdBy: string }>;
    entrypoint: string[];
    cmd?: string[];
    workingDir: string;
    env: string[];
    labels: Record<string, string>;
  }): Promise<{ out: string; manifestDigest: string }>;
}

const ociArch = (): string => ({ x64: 'amd64', arm64: 'arm64' })[process.arch as 'x64'] ?? process.arch;
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** sha256 of a file's contents, hex. */
function fileHash(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('error', reject)
      .on('data', (d) => h.update(d))
      .on('end', () => resolve(h.digest('hex')));
  });
}

/** What an image is made of: the base layer (optional), files staged into a top layer, its config. */
interface Recipe {
  base?: E2eRootfs;
  /** `image path` → `host file` (copied, mode kept) | `{ link }` | `{ dir }`. */
  files: Record<string, string | { link: string } | { dir: true }>;
  entrypoint: string[];
  cmd?: string[];
  createdBy: string;
}

/** The recipe of `id` (the rootfs built lazily, once). */
async function recipeOf(
  spec: E2eImageSpec,
  i: E2eImageInputs,
  rootfs: () => Promise<E2eRootfs>,
  k8sDir: () => Promise<string>,
): Promise<Recipe> {
  const agnhost = path.join(i.e2eBin, 'agnhost');
  const coredns = path.join(i.corednsBin, 'coredns');
  switch (spec.id) {
    case 'agnhost': {
      const porter = path.join(await k8sDir(), 'test', 'images', 'agnhost', 'porter');
      return {
        base: await rootfs(),
        files: {
          agnhost,
          'agnhost-2': { link: 'agnhost' },
          coredns,
          uploads: { dir: true },
          'localhost.crt': path.join(porter, 'localhost.crt'),
          'localhost.key': path.join(porter, 'localhost.key'),
        },
        entrypoint: ['/agnhost'],
        cmd: ['pause'],
        createdBy: 'agnhost (k8s.io/kubernetes/test/images/agnhost v1.36.3), coredns, porter certs',
      };
    }
    case 'glibc-dns-testing':
      return { base: await rootfs(), files: { coredns }, entrypoint: [], cmd: ['bash'], createdBy: 'coredns' };
    case 'nginx':
      return {
        base: await rootfs(),
        files: {},
        entrypoint: [],
        cmd: ['nginx', '-g', 'daemon off;'],
        createdBy: 'nginx-light from the base layer',
      };
    case 'busybox': {
      const bin = await busyboxFromRootfs(await rootfs());
      const applets = (await run(bin, ['--list'])).stdout.split('\n').filter((a) => /^[\w.[-]+$/.test(a));
      const files: Recipe['files'] = { 'bin/busybox': bin };
      for (const a of applets) if (a !== 'busybox') files[`bin/${a}`] = { link: 'busybox' };
      return { files, entrypoint: [], cmd: ['sh'], createdBy: 'busybox-static (Debian 12) and its applet links' };
    }
    default:
      return {
        files: { coredns },
        entrypoint: ['/coredns'],
        createdBy: 'coredns v1.14.2 (github.com/coredns/coredns)',
      };
  }
}

/**
 * Extracts the static busybox of the root filesystem into `<rootfs>.busybox/busybox` (cached;
 * named `busybox`: it picks its applet by the name it runs under). @returns its path.
 */
async function busyboxFromRootfs(rootfs: E2eRootfs): Promise<string> {
  const out = path.join(`${rootfs.tar}.busybox`, 'busybox');
  if (existsSync(out)) return out;
  const tmp = await mkdtemp(`${rootfs.tar}.x-`);
  try {
    await run('tar', ['-xf', rootfs.tar, '-C', tmp, './usr/bin/busybox']);
    await mkdir(path.dirname(out), { recursive: true });
    await rename(path.join(tmp, 'usr', 'bin', 'busybox'), out);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return out;
}

/** The cache key of a recipe: every input's content (binaries hashed), the refs, the config. */
async function recipeKey(spec: E2eImageSpec, r: Recipe): Promise<string> {
  const files: Array<[string, string]> = [];
  for (const [p, src] of Object.entries(r.files).sort())
    files.push([p, typeof src === 'string' ? await fileHash(src) : JSON.stringify(src)]);
  const parts = [
    RECIPE_VERSION,
    spec.refs,
    path.basename(r.base?.tar ?? ''),
    files,
    r.entrypoint,
    r.cmd ?? [],
    EPOCH,
    ociArch(),
  ];
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 16);
}

/** Removes the other archives of image `id` (older inputs) from the cache once `keep` is written. */
async function pruneOthers(cacheDir: string, id: string, keep: string): Promise<void> {
  const mine = new RegExp(`^${id}-[0-9a-f]{16}\\.oci\\.tar$`);
  for (const f of await readdir(cacheDir))
    if (mine.test(f) && f !== keep) await rm(path.join(cacheDir, f), { force: true });
}

/** Builds one image archive from its recipe (in `cacheDir`, atomically). @returns the archive path. */
async function buildArchive(oci: OciModule, spec: E2eImageSpec, r: Recipe, cacheDir: string): Promise<string> {
  const archive = path.join(cacheDir, `${spec.id}-${await recipeKey(spec, r)}.oci.tar`);
  if (existsSync(archive)) return archive;
  const work = await mkdtemp(path.join(cacheDir, `.${spec.id}-`));
  try {
    const stage = path.join(work, 'stage');
    await mkdir(stage);
    for (const [p, src] of Object.entries(r.files)) {
      const dst = path.join(stage, p);
      await mkdir(path.dirname(dst), { recursive: true });
      if (typeof src === 'string') {
        await copyFile(src, dst);
        await chmod(dst, /\.(crt|key)$/.test(p) ? 0o644 : 0o755);
      } else if ('link' in src) await symlink(src.link, dst);
      else await mkdir(dst, { recursive: true });
    }
    const layers = r.base ? [{ tar: r.base.tar, createdBy: r.base.createdBy }] : [];
    const paths = Object.keys(r.files).map((p) => `./${p.split('/')[0]}`);
    if (paths.length > 0) {
      const out = await oci.packLayer({
        dir: stage,
        paths: [...new Set(paths)].sort(),
        out: path.join(work, 'top.tar'),
        epoch: EPOCH,
      });
      layers.push({ tar: out, createdBy: r.createdBy });
    }
    const ref = spec.refs[0]!;
    const tmp = path.join(work, 'image.oci.tar');
    await oci.writeOciArchive({
      layoutDir: path.join(work, 'layout'),
      out: tmp,
      tag: ref.slice(ref.lastIndexOf(':') + 1),
      name: ref,
      epoch: EPOCH,
      arch: ociArch(),
      layers,
      entrypoint: r.entrypoint,
      ...(r.cmd ? { cmd: r.cmd } : {}),
      workingDir: '/',
      env: [PATH_ENV],
      labels: { 'io.eni-ipam.e2e-image': spec.id },
    });
    await rename(tmp, archive);
    await pruneOthers(cacheDir, spec.id, path.basename(archive));
    return archive;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Builds (or takes from the cache) every image of {@link E2E_IMAGES}. An image that cannot
 * be built does not stop the others: it is one line in `failed` naming it and its tests.
 * @throws never for an image; only when the cache dir cannot be made.
 */
export async function buildE2eImages(i: E2eImageInputs): Promise<E2eImageSet> {
  const cacheDir = i.cacheDir ?? E2E_IMAGE_CACHE;
  await mkdir(cacheDir, { recursive: true });
  const oci = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'image', 'oci.mjs')).href)) as OciModule;
  let rootfs: Promise<E2eRootfs> | undefined;
  const getRootfs = (): Promise<E2eRootfs> => (rootfs ??= buildE2eRootfs({ cacheDir, epoch: EPOCH, arch: ociArch() }));
  const k8sDir = async (): Promise<string> =>
    (
      await run('go', ['list', '-m', '-f', '{{.Dir}}', 'k8s.io/kubernetes'], {
        cwd: path.join(ROOT, 'cluster', 'go', 'e2e'),
      })
    ).stdout.trim();
  const set: E2eImageSet = { built: [], failed: [] };
  for (const spec of E2E_IMAGES) {
    try {
      const archive =
        spec.id === 'pause'
          ? (await buildPauseImage({ cacheDir, ref: spec.refs[0]! })).tarPath
          : await buildArchive(oci, spec, await recipeOf(spec, i, getRootfs, k8sDir), cacheDir);
      set.built.push({ id: spec.id, refs: spec.refs, archive });
    } catch (e) {
      const why = ((e as Error).message.split('\n')[0] ?? '').trim();
      set.failed.push(`${spec.refs.join(', ')}: cannot build (needed by ${spec.neededBy}): ${why}`);
    }
  }
  return set;
}

/** A node's containerd as `ctr` reaches it. */
export interface NodeContainerd {
  /** containerd's socket, as seen from this process. */
  socket: string;
  /** The `ctr` binary (cluster/build.sh's containerd part). */
  ctr: string;
}

/**
 * Imports every built image into `ctd`'s `k8s.io` namespace under each of its names
 * (`ctr images import`, then `ctr images tag --force` for the other names). Idempotent.
 * @throws Error naming the archive or tag and ctr's stderr.
 */
export async function importE2eImages(ctd: NodeContainerd, images: BuiltE2eImage[]): Promise<void> {
  const ctr = (args: string[]): Promise<unknown> =>
    run(ctd.ctr, ['--address', ctd.socket, '-n', 'k8s.io', ...args], { maxBuffer: 1 << 24 }).catch(
      (e: { stderr?: string; message: string }) => {
        throw new Error(`ctr ${args.join(' ')}: ${(e.stderr ?? e.message).trim()}`);
      },
    );
  for (const img of images) {
    await ctr(['images', 'import', img.archive]);
    for (const ref of img.refs.slice(1)) await ctr(['images', 'tag', '--force', img.refs[0]!, ref]);
  }
}
