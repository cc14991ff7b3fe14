/**
 * Registry-free "pause" image for containerd's CRI `sandbox_image`, built at test time:
 * a static C pause binary (`gcc -static`, needs gcc + libc6-dev) packed as a single
 * uncompressed layer into an OCI image layout (OCI image-spec v1.0: oci-layout,
 * index.json, blobs/sha256), archived as a tar that `ctr -n k8s.io images import`
 * accepts. The index annotation `io.containerd.image.name` names the image.
 *
 * Deterministic: tar entries have fixed mtime/owner and sorted names, so the digest
 * only changes with the compiler/libc. The result is cached under `cacheDir`, keyed by
 * the source, image ref, architecture and `gcc --version`.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Default image reference; the registry host never has to exist (the image is imported, never pulled). */
export const PAUSE_IMAGE_REF = 'registry.local/eni-ipam/pause:test';

/** The pause program: sleeps until SIGINT/SIGTERM (then exits 0) and reaps zombies. */
const PAUSE_C = `#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
static void on_term(int s) { (void)s; _exit(0); }
static void on_chld(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  struct sigaction t = { .sa_handler = on_term };
  struct sigaction c = { .sa_handler = on_chld, .sa_flags = SA_NOCLDSTOP };
  sigaction(SIGINT, &t, 0);
  sigaction(SIGTERM, &t, 0);
  sigaction(SIGCHLD, &c, 0);
  for (;;) pause();
}
`;

/** A built pause image. */
export interface PauseImage {
  /** Absolute path of the OCI layout tarball. */
  tarPath: string;
  /** Image reference it is imported under, e.g. `registry.local/eni-ipam/pause:test`. */
  ref: string;
  /** Manifest digest, `sha256:<hex>`. */
  manifestDigest: string;
}

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** OCI architecture name of this machine (Go GOARCH spelling). */
function ociArch(): string {
  const m: Record<string, string> = {
    x64: 'amd64',
    arm64: 'arm64',
    arm: 'arm',
    ppc64: 'ppc64le',
    s390x: 's390x',
    riscv64: 'riscv64',
  };
  return m[process.arch] ?? process.arch;
}

/** Deterministic tar of `names` (relative to `dir`) with GNU tar. */
async function detTar(dir: string, out: string, names: string[]): Promise<void> {
  await run('tar', [
    '--sort=name',
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mtime=@0',
    '--format=gnu',
    '-C',
    dir,
    '-cf',
    out,
    ...names,
  ]);
}

/** Writes `data` as a content-addressed blob; returns its descriptor fields. */
async function putBlob(blobs: string, data: Buffer): Promise<{ digest: string; size: number }> {
  const hex = sha256(data);
  await writeFile(path.join(blobs, hex), data);
  return { digest: `sha256:${hex}`, size: data.length };
}

/**
 * Builds (or reuses from cache) the pause image tarball.
 * @param o.cacheDir directory for cached tarballs (default `<os.tmpdir()>/eni-ipam-pause-cache`);
 *   a cache entry is written atomically (temp file + rename), so concurrent builders are safe.
 * @param o.ref image reference to register (default PAUSE_IMAGE_REF).
 * @throws Error if gcc/tar fail (message names the missing packages: gcc, libc6-dev).
 */
export function buildPauseImage(o: { cacheDir?: string; ref?: string } = {}): Promise<PauseImage> {
  return buildStaticCImage({ name: 'pause', source: PAUSE_C, ref: o.ref ?? PAUSE_IMAGE_REF, cacheDir: o.cacheDir });
}

/**
 * Builds (or reuses from cache) a one-binary image: C `source` compiled with `gcc -static`
 * to `/<name>`, the image's entrypoint (`args` appended as its Cmd), packed as an OCI layout
 * tarball that `ctr images import` accepts, registered as `ref`.
 * @param o.cacheDir as for buildPauseImage (the same default dir; keys differ by source and ref).
 * @throws Error if gcc/tar fail (message names the missing packages: gcc, libc6-dev).
 */
export async function buildStaticCImage(o: {
  name: string;
  source: string;
  ref: string;
  args?: string[];
  cacheDir?: string | undefined;
}): Promise<PauseImage> {
  const { ref, name } = o;
  const cacheDir = o.cacheDir ?? path.join(os.tmpdir(), 'eni-ipam-pause-cache');
  let gccVersion: string;
  try {
    gccVersion = (await run('gcc', ['--version'])).stdout.split('\n')[0] ?? '';
  } catch (e) {
    throw new Error(
      `gcc not found: install gcc and libc6-dev (scripts/ensure-deps.sh --containerd): ${(e as Error).message}`,
    );
  }
  const key = sha256(JSON.stringify([o.source, ref, o.args ?? [], ociArch(), gccVersion, 1])).slice(0, 16);
  const tarPath = path.join(cacheDir, `${name}-${key}.tar`);
  const digestPath = `${tarPath}.digest`;
  if (existsSync(tarPath) && existsSync(digestPath) && (await stat(tarPath)).size > 0) {
    return { tarPath, ref, manifestDigest: (await readFile(digestPath, 'utf8')).trim() };
  }

  await mkdir(cacheDir, { recursive: true });
  const w = await mkdtemp(path.join(cacheDir, '.build-'));
  try {
    const rootfs = path.join(w, 'rootfs');
    const layout = path.join(w, 'layout');
    const blobs = path.join(layout, 'blobs', 'sha256');
    await mkdir(rootfs);
    await mkdir(blobs, { recursive: true });
    await writeFile(path.join(w, `${name}.c`), o.source);
    try {
      await run('gcc', ['-static', '-Os', '-s', '-o', path.join(rootfs, name), path.join(w, `${name}.c`)]);
    } catch (e) {
      throw new Error(
        `gcc -static failed (is libc6-dev installed?): ${(e as { stderr?: string }).stderr ?? (e as Error).message}`,
      );
    }

    // Layer: uncompressed tar, so its digest is also its diff_id.
    await detTar(rootfs, path.join(w, 'layer.tar'), [name]);
    const layer = await putBlob(blobs, await readFile(path.join(w, 'layer.tar')));
    const config = await putBlob(
      blobs,
      Buffer.from(
        JSON.stringify({
          architecture: ociArch(),
          os: 'linux',
          config: { Entrypoint: [`/${name}`], ...(o.args ? { Cmd: o.args } : {}), WorkingDir: '/' },
          rootfs: { type: 'layers', diff_ids: [layer.digest] },
        }),
      ),
    );
    const manifest = await putBlob(
      blobs,
      Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
          layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
        }),
      ),
    );
    await writeFile(
      path.join(layout, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifest,
            platform: { architecture: ociArch(), os: 'linux' },
            annotations: {
              'io.containerd.image.name': ref,
              'org.opencontainers.image.ref.name': ref.slice(ref.lastIndexOf(':') + 1),
            },
          },
        ],
      }),
    );
    await writeFile(path.join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));

    const tmpTar = path.join(w, 'image.tar');
    await detTar(layout, tmpTar, ['oci-layout', 'index.json', 'blobs']);
    await writeFile(`${digestPath}.tmp-${process.pid}`, manifest.digest);
    await rename(`${digestPath}.tmp-${process.pid}`, digestPath);
    await rename(tmpTar, tarPath);
    return { tarPath, ref, manifestDigest: manifest.digest };
  } finally {
    await rm(w, { recursive: true, force: true });
  }
}
