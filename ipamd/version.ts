/**
 * eni-ipam's version and the Node.js runtime it runs on: what ipamd logs at start,
 * `awscni_build_info` carries and `eni-ipam version` / `eni-ipamd version` print.
 * Reads package.json once (no other I/O).
 */
import { readFileSync } from 'node:fs';

let cached: string | undefined;

/**
 * This package's version from its package.json (dist/ipamd → 2 levels up; from the
 * source tree or a module one folder deeper → 3), or "unknown" when none is found.
 * The image ships /app/package.json beside /app/dist.
 */
export function packageVersion(): string {
  if (cached) return cached;
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'eni-ipam' && pkg.version) return (cached = pkg.version);
    } catch {
      /* try the next */
    }
  }
  return (cached = 'unknown');
}

/** What a build is: eni-ipam's version and the Node.js version running it (`process.version`, e.g. v20.19.2). */
export interface BuildInfo {
  version: string;
  node: string;
}

/** This process's {@link BuildInfo}. */
export function buildInfo(): BuildInfo {
  return { version: packageVersion(), node: process.version };
}

/** One line for `<program> version`: `eni-ipamd 0.1.0 (Node.js v20.19.2)`. */
export function versionLine(program: string, b: BuildInfo = buildInfo()): string {
  return `${program} ${b.version} (Node.js ${b.node})`;
}
