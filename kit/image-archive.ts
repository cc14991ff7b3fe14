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
let drift: string | undefined;

/**
 * The reason a failed image build gave: its last line (`eni-ipam image: <why>`, the one
 * line every build failure ends with, scripts/image/common.mjs), without the prefix. The
 * lines before it are progress (`npm pack …`, `mmdebstrap …`), never the cause.
 */
export function imageBuildFailure(stderr: string): string {
  const last = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .at(-1);
  return last ? last.replace(/^eni-ipam image: /, '') : 'it printed nothing';
}

/** The Debian packages that moved on the mirror since the content lock was written, as the last build reported them (undefined: none). */
export const imageDebianDrift = (): string | undefined => drift;

/**
 * The archive to test, built if needed: $ENI_IPAM_IMAGE_ARCHIVE when set, else what
 * `node scripts/image/build.mjs` (= `npm run image`; a no-op when its inputs are
 * unchanged, so one build serves the whole test run) reports in
 * build/image/eni-ipam-<version>.json. Memoised per process; across processes the builds of
 * one checkout take turns (build.mjs holds flock(1) on build/image/.build.lock).
 *
 * Built with `--debian-drift warn`: Debian packages that moved to a newer point or security
 * version on the mirror since image/contents-<arch>.lock was written do not stop the tests or
 * the cluster; the build's warning naming them is printed once (and kept:
 * {@link imageDebianDrift}). `npm run release` stays strict. $ENI_IPAM_IMAGE_LOCK checks
 * against another content list (the build's `--lock`).
 * @returns the archive path. @throws Error whose first line is the build's own reason
 *   ({@link imageBuildFailure}), then its whole output.
 */
export function ensureImageArchive(): Promise<string> {
  return (building ??= (async () => {
    const env = process.env['ENI_IPAM_IMAGE_ARCHIVE'];
    if (env) {
      if (!existsSync(env)) throw new Error(`ENI_IPAM_IMAGE_ARCHIVE=${env} does not exist`);
      return env;
    }
    const lock = process.env['ENI_IPAM_IMAGE_LOCK'];
    const args = ['--debian-drift', 'warn', ...(lock ? ['--lock', lock] : [])];
    try {
      // build.mjs takes build/image/.build.lock itself: one build at a time per checkout.
      const build = path.join(ROOT, 'scripts', 'image', 'build.mjs');
      const { stderr } = await run(process.execPath, [build, ...args], {
        cwd: ROOT,
        maxBuffer: 16 << 20,
      });
      drift = /^eni-ipam image: warning: (Debian packages moved.*)$/m.exec(stderr)?.[1];
      if (drift) process.stderr.write(`eni-ipam image: warning: ${drift}\n`);
    } catch (e) {
      const stderr = (e as { stderr?: string }).stderr ?? '';
      throw new Error(`npm run image failed: ${imageBuildFailure(stderr || (e as Error).message)}\n${stderr}`);
    }
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    return (
      JSON.parse(readFileSync(path.join(ROOT, 'build', 'image', `eni-ipam-${version}.json`), 'utf8')) as {
        archive: string;
      }
    ).archive;
  })());
}
