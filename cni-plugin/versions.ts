/** CNI specification versions this plugin speaks (CNI spec, "Version"). */

/** Every `cniVersion` accepted in a network configuration, oldest first. */
export const SUPPORTED_VERSIONS: readonly string[] = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];

/** The newest supported version: what `VERSION` reports and errors use when the config's is unknown. */
export const LATEST_VERSION = '1.1.0';

/** True when `v` is one of {@link SUPPORTED_VERSIONS}. */
export function isSupportedVersion(v: unknown): v is string {
  return typeof v === 'string' && SUPPORTED_VERSIONS.includes(v);
}
