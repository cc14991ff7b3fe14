/** CNI specification versions this plugin speaks (CNI spec, "Version"). */

/** Every `cniVersion` accepted in a network configuration, oldest first. */
export const SUPPORTED_VERSIONS: readonly string[] = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

/** The newest supported version: what `VERSION` reports and errors use when the config's is unknown. */
export const LATEST_VERSION = '1.1.0';

/** True when `v` is one of {@link SUPPORTED_VERSIONS}. */
export function isSupportedVersion(v: unknown): v is string {
  return typeof v === 'string' && SUPPORTED_VERSIONS.includes(v);
}

/**
 * True when semantic version `v` (`major.minor.patch`, e.g. "0.4.0") is `min` or newer.
 * Used for the verbs' minimum versions: CHECK since 0.4.0, GC and STATUS since 1.1.0.
 */
export function versionAtLeast(v: string, min: string): boolean {
  const a = v.split('.').map(Number);
  const b = min.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    if (x !== y) return x > y;
  }
  return true;
}
