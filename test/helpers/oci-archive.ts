/**
 * Reads an OCI image archive (a tar of an OCI image layout, as `npm run image` writes it)
 * for the image tests: the index, the one manifest, the image config, and each layer's
 * member list. Uses GNU tar only; nothing is unpacked except the small JSON blobs and
 * members asked for.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The parts of an OCI image config these tests read (image-spec config.md). */
export interface OciImageConfig {
  architecture: string;
  os: string;
  config: {
    Entrypoint?: string[];
    Cmd?: string[];
    WorkingDir?: string;
    User?: string;
    Env?: string[];
    Labels?: Record<string, string>;
  };
  rootfs: { type: string; diff_ids: string[] };
}

/** An opened archive: its index, manifest and config, and helpers to read layers. */
export interface OciArchive {
  index: { manifests: { digest: string; mediaType: string; annotations?: Record<string, string> }[] };
  manifest: { layers: { digest: string; mediaType: string; size: number }[]; config: { digest: string } };
  config: OciImageConfig;
  /** Member names of layer `i` (bottom first), directories with a trailing slash, `./` prefix as stored. */
  layerMembers(i: number): Promise<string[]>;
  /** Bytes of one member of layer `i`. */
  layerFile(i: number, member: string): Promise<Buffer>;
  /** Removes the scratch dir. */
  close(): Promise<void>;
}

/**
 * Opens an OCI archive: unpacks it into a scratch dir (blobs stay compressed).
 * @param archive path of the .oci.tar
 * @throws Error when it is not an OCI layout with exactly one manifest
 */
export async function openOciArchive(archive: string): Promise<OciArchive> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-oci-'));
  try {
    await run('tar', ['-xf', archive, '-C', dir]);
    const blob = (digest: string): string => path.join(dir, 'blobs', ...digest.split(':'));
    const json = async <T>(p: string): Promise<T> => JSON.parse(await readFile(p, 'utf8')) as T;
    const layout = await json<{ imageLayoutVersion: string }>(path.join(dir, 'oci-layout'));
    if (!layout.imageLayoutVersion) throw new Error(`${archive}: oci-layout has no imageLayoutVersion`);
    const index = await json<OciArchive['index']>(path.join(dir, 'index.json'));
    if (index.manifests.length !== 1)
      throw new Error(`${archive}: ${index.manifests.length} manifests in index.json, expected 1`);
    const manifest = await json<OciArchive['manifest']>(blob(index.manifests[0]!.digest));
    const config = await json<OciImageConfig>(blob(manifest.config.digest));
    const layerPath = (i: number): string => {
      const l = manifest.layers[i];
      if (!l) throw new Error(`no layer ${i} (image has ${manifest.layers.length})`);
      return blob(l.digest);
    };
    return {
      index,
      manifest,
      config,
      async layerMembers(i) {
        const { stdout } = await run('tar', ['-tzf', layerPath(i)], { maxBuffer: 64 * 1024 * 1024 });
        return stdout.split('\n').filter(Boolean);
      },
      async layerFile(i, member) {
        const { stdout } = await run('tar', ['-xzOf', layerPath(i), member], {
          encoding: 'buffer',
          maxBuffer: 64 * 1024 * 1024,
        });
        return stdout;
      },
      close: () => rm(dir, { recursive: true, force: true }),
    };
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
}

/**
 * Whether an ELF executable is statically linked: it has no PT_INTERP program header
 * (ELF spec, "Program Header"; 64-bit little-endian only).
 * @throws Error when `elf` is not a 64-bit little-endian ELF file
 */
export function isStaticElf(elf: Buffer): boolean {
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1)
    throw new Error('not a 64-bit little-endian ELF file');
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    if (elf.readUInt32LE(phoff + i * phentsize) === 3 /* PT_INTERP */) return false;
  }
  return true;
}
