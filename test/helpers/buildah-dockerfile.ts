/**
 * Builds the repository's Dockerfile with Debian's buildah, without an image registry: the
 * `FROM debian:bookworm-slim` line is replaced (`buildah bud --from`) by a local stand-in,
 * Debian 12 with apt made by mmdebstrap from the machine's apt sources and packed by
 * umoci (cached under build/image/cache). Everything else in the Dockerfile runs as
 * written, `apt-get install` against the real mirror included. For the image test's
 * Dockerfile-versus-archive comparison.
 *
 * Needs root, mmdebstrap, umoci and buildah (`scripts/ensure-deps.sh --image`).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A Dockerfile build mounted for inspection. */
export interface BuildahImage {
  /** Root of the built image's filesystem (read it, do not write). */
  rootfs: string;
  /** The image config as buildah stored it (OCI image config `config` object). */
  config: { Entrypoint?: string[]; WorkingDir?: string; User?: string; Env?: string[] };
  /** Unmounts and removes the container, the image and buildah's storage. Idempotent. */
  remove(): Promise<void>;
}

/**
 * Makes (or takes from `cacheDir`) an OCI archive of Debian 12 with apt, standing for
 * debian:bookworm-slim.
 * @returns path of the .oci.tar
 */
async function bookwormBase(cacheDir: string): Promise<string> {
  const sources = '/etc/apt/sources.list.d/debian.sources';
  const key = createHash('sha256').update(readFileSync(sources)).digest('hex').slice(0, 12);
  const out = path.join(cacheDir, `bookworm-apt-${key}.oci.tar`);
  if (existsSync(out)) return out;
  await mkdir(cacheDir, { recursive: true });
  const tmp = await mkdtemp(path.join(cacheDir, 'bookworm-apt-tmp-'));
  try {
    const tar = path.join(tmp, 'rootfs.tar');
    // In a private mount namespace: the chroot's /proc and /sys never propagate into the mount
    // namespaces node and cluster harnesses create meanwhile (a copy busy there failed umount).
    const privateNs = ['--mount', '--propagation', 'private', 'mmdebstrap'];
    await run(
      'unshare',
      [...privateNs, '--variant=apt', '--skip=output/dev', '--format=tar', 'bookworm', tar, sources],
      {
        maxBuffer: 64 << 20,
      },
    );
    const L = path.join(tmp, 'layout');
    await run('umoci', ['init', '--layout', L]);
    await run('umoci', ['new', '--image', `${L}:bookworm`]);
    await run('umoci', ['raw', 'add-layer', '--image', `${L}:bookworm`, tar]);
    await run('umoci', [
      'config',
      '--image',
      `${L}:bookworm`,
      '--config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    ]);
    await run('tar', ['-C', L, '-cf', `${out}.tmp`, 'oci-layout', 'index.json', 'blobs']);
    await rename(`${out}.tmp`, out);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return out;
}

/**
 * Runs `buildah bud` on `contextDir`'s Dockerfile with a local Debian base, then mounts the result.
 * @param o contextDir: the repository root (with build/image/stage staged); cacheDir: where the base is cached
 * @throws Error with buildah's output when the build fails (storage is removed first)
 */
export async function buildDockerfile(o: { contextDir: string; cacheDir: string }): Promise<BuildahImage> {
  const base = await bookwormBase(o.cacheDir);
  const storage = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-buildah-'));
  const b = ['--root', path.join(storage, 'root'), '--runroot', path.join(storage, 'run'), '--storage-driver', 'vfs'];
  // buildah's network setup takes a lock in its CNI config dir even with --network host; its
  // default, /etc/cni/net.d, is a machine path: point it (containers.conf(5) [network]) at ours.
  const conf = path.join(storage, 'containers.conf');
  await mkdir(path.join(storage, 'cni'), { recursive: true });
  await writeFile(conf, `[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "${path.join(storage, 'cni')}"\n`);
  const env = { ...process.env, CONTAINERS_CONF: conf };
  const tag = `localhost/eni-ipam-dockerfile:${process.pid}`;
  let container: string | undefined;
  const remove = async (): Promise<void> => {
    if (container) {
      await run('buildah', [...b, 'umount', container], { env }).catch(() => undefined);
      await run('buildah', [...b, 'rm', container], { env }).catch(() => undefined);
      container = undefined;
    }
    await run('buildah', [...b, 'rmi', '--all', '--force'], { env }).catch(() => undefined);
    await rm(storage, { recursive: true, force: true });
  };
  try {
    await run(
      'buildah',
      [
        ...b,
        'bud',
        '--isolation',
        'chroot',
        '--network',
        'host',
        '--from',
        `oci-archive:${base}`,
        '-t',
        tag,
        o.contextDir,
      ],
      { maxBuffer: 64 << 20, env: { ...env, BUILDAH_LAYERS: 'false' } },
    );
    container = (await run('buildah', [...b, 'from', tag], { env })).stdout.trim();
    const rootfs = (await run('buildah', [...b, 'mount', container], { env })).stdout.trim();
    const inspect = JSON.parse(
      (await run('buildah', [...b, 'inspect', '--type', 'image', tag], { maxBuffer: 16 << 20, env })).stdout,
    ) as { OCIv1: { config: BuildahImage['config'] } };
    return { rootfs, config: inspect.OCIv1.config, remove };
  } catch (e) {
    await remove();
    const err = e as { message: string; stdout?: string; stderr?: string };
    throw new Error(
      `buildah bud failed: ${err.message}\n${(err.stdout ?? '').slice(-2000)}\n${(err.stderr ?? '').slice(-2000)}`,
    );
  }
}
