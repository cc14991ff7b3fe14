/**
 * Assembles the OCI image with Debian's umoci (init, new, raw add-layer, config, gc) and
 * writes it as an OCI archive: a tar of the OCI image layout (oci-layout, index.json,
 * blobs/) that `ctr images import`, `skopeo copy oci-archive:…` and podman load.
 *
 * Layers are tarballs made here with GNU tar (sorted names, every mtime set to the
 * build's SOURCE_DATE_EPOCH, owner root, no atime/ctime), so equal inputs give equal
 * layer digests. The index names the image twice: `org.opencontainers.image.ref.name`
 * (the tag, for OCI tools) and `io.containerd.image.name` (the full reference containerd
 * stores it under: the name a pod spec's `image: eni-ipam:<tag>` resolves to).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { ImageBuildError, run } from './common.mjs';

/** GNU tar options that make an archive depend only on file names, contents and modes. */
function reproducibleTar(epoch) {
  return ['--sort=name', `--mtime=@${epoch}`, '--owner=0', '--group=0', '--numeric-owner', '--format=gnu', '--mode=go-w'];
}

/**
 * Packs `paths` (relative to `dir`, given as `./x`) into an uncompressed layer tarball.
 * @param {{ dir: string, paths: string[], exclude?: string[], out: string, epoch: number }} o
 *   exclude: GNU tar --exclude patterns (matched against `./…` member names)
 * @returns {Promise<string>} o.out
 * @throws ImageBuildError when tar fails
 */
export async function packLayer(o) {
  const args = ['--create', `--file=${o.out}`, `--directory=${o.dir}`, ...reproducibleTar(o.epoch), ...(o.exclude ?? []).map((e) => `--exclude=${e}`), ...o.paths];
  await run('tar', args, { what: `pack the image layer ${o.out}` });
  return o.out;
}

/**
 * Builds the OCI layout and archive.
 * @param {{ layoutDir: string, out: string, tag: string, name: string, epoch: number,
 *   arch: string, layers: { tar: string, createdBy: string }[], entrypoint: string[],
 *   workingDir: string, env: string[], labels: Record<string, string>, cmd?: string[] }} o
 *   layoutDir: scratch dir for the layout (emptied); out: the .oci.tar to write; tag: OCI tag
 *   (`[A-Za-z0-9_][A-Za-z0-9_.-]*`); name: full reference for containerd
 *   (`docker.io/library/eni-ipam:0.1.0`); arch: OCI architecture (amd64, arm64);
 *   layers: bottom first, uncompressed tarballs (umoci gzips them); cmd: the image's default
 *   arguments (OCI config `Cmd`), none when absent
 * @returns {Promise<{ out: string, manifestDigest: string }>}
 * @throws ImageBuildError when umoci or tar fails
 */
export async function writeOciArchive(o) {
  const created = new Date(o.epoch * 1000).toISOString();
  const L = o.layoutDir;
  const image = `${L}:${o.tag}`;
  rmSync(L, { recursive: true, force: true });
  const what = 'assemble the OCI image (umoci)';
  await run('umoci', ['init', '--layout', L], { what });
  await run('umoci', ['new', '--image', image], { what });
  for (const layer of o.layers) {
    await run('umoci', ['raw', 'add-layer', '--image', image, `--history.created=${created}`, `--history.created_by=${layer.createdBy}`, layer.tar], { what });
  }
  const config = [
    '--image', image, `--created=${created}`, '--no-history', '--os=linux', `--architecture=${o.arch}`,
    '--config.user=0:0', `--config.workingdir=${o.workingDir}`,
    ...o.entrypoint.map((e) => `--config.entrypoint=${e}`),
    ...(o.cmd ?? []).map((c) => `--config.cmd=${c}`),
    ...o.env.map((e) => `--config.env=${e}`),
    ...Object.entries(o.labels).map(([k, v]) => `--config.label=${k}=${v}`),
  ];
  await run('umoci', ['config', ...config], { what });
  await run('umoci', ['gc', '--layout', L], { what });

  const indexPath = `${L}/index.json`;
  const index = JSON.parse(readFileSync(indexPath, 'utf8'));
  if (!Array.isArray(index.manifests) || index.manifests.length !== 1) {
    throw new ImageBuildError(`umoci wrote ${index.manifests?.length ?? 0} manifests into ${indexPath}, expected 1`);
  }
  const m = index.manifests[0];
  m.annotations = { ...m.annotations, 'io.containerd.image.name': o.name, 'org.opencontainers.image.ref.name': o.tag };
  writeFileSync(indexPath, `${JSON.stringify(index)}\n`);
  await run('tar', ['--create', `--file=${o.out}`, `--directory=${L}`, ...reproducibleTar(o.epoch), 'oci-layout', 'index.json', 'blobs'],
    { what: `write the OCI archive ${o.out}` });
  return { out: o.out, manifestDigest: m.digest };
}
