/**
 * The image archive `npm run image` builds (build/image/eni-ipam-<version>.oci.tar), for
 * the tests that run it in containerd, and the reference containerd stores it under.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The archive to test: $ENI_IPAM_IMAGE_ARCHIVE if set (undefined when that file is
 * missing), else the newest `build/image/*.oci.tar` of this checkout, else undefined.
 */
export function findImageArchive(): string | undefined {
  const env = process.env['ENI_IPAM_IMAGE_ARCHIVE'];
  if (env) return existsSync(env) ? env : undefined;
  const dir = path.join(ROOT, 'build', 'image');
  if (!existsSync(dir)) return undefined;
  const tars = readdirSync(dir)
    .filter((f) => f.endsWith('.oci.tar'))
    .map((f) => path.join(dir, f));
  return tars.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

/**
 * The reference an OCI archive's index.json records for containerd
 * (`io.containerd.image.name`, e.g. `docker.io/library/eni-ipam:0.1.0`).
 * @throws Error when tar fails or the index names no image.
 */
export async function imageRefOf(archive: string): Promise<string> {
  const index = JSON.parse((await run('tar', ['-xOf', archive, 'index.json'], { maxBuffer: 1 << 20 })).stdout) as {
    manifests?: Array<{ annotations?: Record<string, string> }>;
  };
  const ref = index.manifests?.map((m) => m.annotations?.['io.containerd.image.name']).find(Boolean);
  if (!ref) throw new Error(`${archive}: index.json names no image (annotation io.containerd.image.name)`);
  return ref;
}

let building: Promise<string> | undefined;

/**
 * The archive to test, built if needed: $ENI_IPAM_IMAGE_ARCHIVE when set, else what
 * `node scripts/image/build.mjs` (= `npm run image`; a no-op when its inputs are
 * unchanged, so one build serves the whole test run) reports in
 * build/image/eni-ipam-<version>.json. Memoised per process.
 * @returns the archive path. @throws Error with the build's stderr when it fails.
 */
export function ensureImageArchive(): Promise<string> {
  return (building ??= (async () => {
    const env = process.env['ENI_IPAM_IMAGE_ARCHIVE'];
    if (env) {
      if (!existsSync(env)) throw new Error(`ENI_IPAM_IMAGE_ARCHIVE=${env} does not exist`);
      return env;
    }
    try {
      await run(process.execPath, [path.join(ROOT, 'scripts', 'image', 'build.mjs')], {
        cwd: ROOT,
        maxBuffer: 16 << 20,
      });
    } catch (e) {
      throw new Error(`npm run image failed: ${(e as { stderr?: string }).stderr ?? (e as Error).message}`);
    }
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    return (
      JSON.parse(readFileSync(path.join(ROOT, 'build', 'image', `eni-ipam-${version}.json`), 'utf8')) as {
        archive: string;
      }
    ).archive;
  })());
}
