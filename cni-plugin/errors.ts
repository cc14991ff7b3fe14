/**
 * The CNI error type and its JSON form (CNI spec, "Error" result: `cniVersion`, `code`,
 * `msg`, `details`; printed on stdout, exit code 1). Codes 1-99 are the spec's
 * well-known codes; 100 and up are this plugin's own.
 */

/** Well-known CNI error codes (CNI spec 1.0/1.1, "Well-known Error Codes"), plus ours (≥ 100). */
export const CniCode = {
  /** Incompatible CNI version. */
  IncompatibleVersion: 1,
  /** Unsupported field in the network configuration. */
  UnsupportedField: 2,
  /** Container unknown or does not exist. */
  UnknownContainer: 3,
  /** Invalid necessary environment variables (CNI_COMMAND, CNI_CONTAINERID, ...). */
  InvalidEnv: 4,
  /** I/O failure (e.g. the netns cannot be entered, `ip` failed). */
  IoFailure: 5,
  /** Failed to decode content (stdin is not JSON). */
  DecodeFailure: 6,
  /** Invalid network config. */
  InvalidNetworkConfig: 7,
  /** Try again later (ipamd unavailable, or no IP available now). */
  TryAgainLater: 11,
  /** STATUS (1.1.0): the plugin is not available, i.e. cannot service ADD requests. */
  PluginNotAvailable: 50,
  /** STATUS (1.1.0): not available, and existing containers may have limited connectivity. */
  PluginNotAvailableLimitedConnectivity: 51,
  /** Plugin-specific: ipamd refused the request (version skew, bad request, internal error). */
  IpamdError: 100,
  /** Plugin-specific: CHECK found the attachment drifted from `prevResult` (the message says what). */
  CheckFailed: 100,
} as const;

/** A failure to report to the runtime as a CNI error object. */
export class CniError extends Error {
  /**
   * @param code CNI error code ({@link CniCode}).
   * @param msg short message (the spec's `msg`).
   * @param details longer explanation (the spec's `details`), e.g. the underlying error.
   */
  constructor(readonly code: number, readonly msg: string, readonly details = '') {
    super(details ? `${msg}: ${details}` : msg);
    this.name = 'CniError';
  }

  /** The spec's error object for `cniVersion` (the version the runtime asked for, or our latest). */
  toJSON(cniVersion: string): { cniVersion: string; code: number; msg: string; details: string } {
    return { cniVersion, code: this.code, msg: this.msg, details: this.details };
  }
}

/**
 * Wraps any thrown value as a {@link CniError}: a CniError is returned as is, anything
 * else becomes `fallbackCode` with its message as `details`.
 */
export function asCniError(e: unknown, fallbackCode: number = CniCode.IoFailure, msg = 'internal error'): CniError {
  if (e instanceof CniError) return e;
  return new CniError(fallbackCode, msg, e instanceof Error ? e.message : String(e));
}
