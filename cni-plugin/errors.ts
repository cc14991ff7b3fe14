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

/** One error path: its code, its `msg` (`{name}` marks a value filled in), when it happens, who answers it. */
export interface CniErrorEntry {
  code: number;
  msg: string;
  when: string;
  /** `plugin`: the TypeScript verbs (in ipamd or the Node plugin); `shim`: the C shim. */
  by: 'plugin' | 'shim';
  /** Shim entries whose `msg` is built with snprintf: the C format string, as in the source. */
  cFormat?: string;
}

/** Longest echoed value in a message, in characters ({@link echo}). */
export const ECHO_MAX_CHARS = 64;
/** Longest `msg` of an error object, in characters (longer ones are cut by {@link clip}). */
export const MSG_MAX_CHARS = 512;
/** Longest `details` of an error object, in characters. */
export const DETAILS_MAX_CHARS = 2048;

/**
 * `s` cut to `max` characters, with what was cut said (`…(+N chars)`), so an error never
 * carries an unbounded input back to the runtime or the log.
 */
export function clip(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}…(+${s.length - max} chars)`;
}

/**
 * An offending input value quoted for a message: JSON-quoted (escapes control
 * characters) and cut to {@link ECHO_MAX_CHARS} characters of the value. The one way
 * error paths echo what they were given (a 100 KB `cniVersion` comes back as ~80 chars).
 */
export function echo(value: unknown): string {
  const s = typeof value === 'string' ? value : String(value);
  return (
    JSON.stringify(s.length <= ECHO_MAX_CHARS ? s : s.slice(0, ECHO_MAX_CHARS)) +
    (s.length > ECHO_MAX_CHARS ? `…(+${s.length - ECHO_MAX_CHARS} chars)` : '')
  );
}

/** A failure to report to the runtime as a CNI error object. */
export class CniError extends Error {
  /** The spec's `msg`, at most {@link MSG_MAX_CHARS} characters. */
  readonly msg: string;
  /** The spec's `details`, at most {@link DETAILS_MAX_CHARS} characters. */
  readonly details: string;

  /**
   * @param code CNI error code ({@link CniCode}).
   * @param msg short message (the spec's `msg`); cut to {@link MSG_MAX_CHARS}.
   * @param details longer explanation (the spec's `details`), e.g. the underlying error;
   *   cut to {@link DETAILS_MAX_CHARS}.
   */
  constructor(
    readonly code: number,
    msg: string,
    details = '',
  ) {
    const m = clip(msg, MSG_MAX_CHARS);
    const d = clip(details, DETAILS_MAX_CHARS);
    super(d ? `${m}: ${d}` : m);
    this.msg = m;
    this.details = d;
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
