/**
 * zod builders for ipamd's path-valued environment variables (docs/design.md#bounds-on-bad-input).
 * Each builder tags the schema it returns with a {@link PathKind}, so the config spec itself
 * says which variables are paths: {@link pathKindOf} reads the tag, and
 * `config-paths.ts` checks every tagged variable on disk at start (symlinks resolved), and
 * the unit test enumerates them from the spec, so a path variable added later is checked
 * and tested without anyone listing it. The checks here need no I/O: absolute, no NUL,
 * not literally under /proc, /sys or /dev, a socket path within `sun_path`.
 */
import { z } from 'zod';
import { PSEUDO_FS_ROOTS } from '../nodefs/dirs.js';
import { chartString, chartTyped } from './config-chart-types.js';
import { fail, type Field } from './config-fields.js';
import { BLANK, trimBlank } from './config-patterns.js';

export { pseudoFsOf } from '../nodefs/dirs.js';

/**
 * What a path setting names, which decides its checks:
 * - `file`: a regular file ipamd writes (checkpoint, plugin log); its directory is made;
 * - `log`: `stdout`, or a `file` (AWS_VPC_K8S_CNI_LOG_FILE);
 * - `dir`: a directory ipamd writes into (CNI conf and bin dirs);
 * - `socket`: a Unix socket ipamd binds or connects to (at most 107 bytes);
 * - `netns`: a network namespace file (nsfs: `/proc/<pid>/ns/net` or `/run/netns/<name>`),
 *   which is the one kind allowed under /proc.
 */
export type PathKind = 'file' | 'log' | 'dir' | 'socket' | 'netns';

const KINDS = new WeakMap<object, PathKind>();

/** The {@link PathKind} a field was built with, or undefined for a field that is not a path. */
export function pathKindOf(field: Field<unknown>): PathKind | undefined {
  return KINDS.get(field);
}

/** Longest Unix socket path in bytes: `sun_path` is 108 bytes with the terminating NUL (unix(7)). */
export const MAX_UNIX_SOCKET_PATH_BYTES = 107;

/** Any character an environment value can hold (not NUL), in both regex engines. */
const ANY = '[^\\x00]';

/** What the chart and the parse accept for each kind, without the disk (the rest is checked at start). */
const PATH_BODY: Record<PathKind, string> = {
  file: `/${ANY}*[^/\\x00]`,
  log: `stdout|/${ANY}*[^/\\x00]`,
  dir: `/${ANY}*`,
  // ASCII only, so the chart's character count is the byte count of sun_path.
  socket: `/[\\x01-\\x7f]{0,${MAX_UNIX_SOCKET_PATH_BYTES - 2}}[\\x01-\\x2e\\x30-\\x7f]`,
  netns: `/${ANY}*`,
};

/** A path under a pseudo filesystem as written (not normalized: `/var/../proc` is caught on disk at start). */
const LITERAL_PSEUDO = new RegExp(`^(${PSEUDO_FS_ROOTS.join('|')})(?:/|$)`);

function tagged<T>(kind: PathKind, f: Field<T>, body = PATH_BODY[kind], accepts = PATH_ACCEPTS[kind]): Field<T> {
  KINDS.set(f, kind);
  const str = chartString(body);
  const check =
    kind === 'netns'
      ? str
      : {
          allOf: [
            str,
            { not: { pattern: `^${BLANK}*(?:unix://)?(?:${PSEUDO_FS_ROOTS.join('|')})(?:/${ANY}*)?${BLANK}*$` } },
          ],
        };
  return chartTyped(check, f, accepts);
}

/** What each kind accepts, completing "expected …" in an error line. */
export const PATH_ACCEPTS: Record<PathKind, string> = {
  file: `an absolute file path outside ${PSEUDO_FS_ROOTS.join(', ')} (after symlinks)`,
  log: `"stdout" or an absolute file path outside ${PSEUDO_FS_ROOTS.join(', ')} (after symlinks)`,
  dir: `an absolute directory path outside ${PSEUDO_FS_ROOTS.join(', ')} (after symlinks)`,
  socket: `an absolute Unix socket path of at most 107 ASCII characters outside ${PSEUDO_FS_ROOTS.join(', ')} (after symlinks)`,
  netns: 'an absolute path of a network namespace file (e.g. /run/netns/node or /proc/<pid>/ns/net)',
};

/** Why `p` cannot be a Unix socket path (too long for `sun_path`), or undefined. */
export function socketPathTooLong(p: string): string | undefined {
  const n = Buffer.byteLength(p);
  return n > MAX_UNIX_SOCKET_PATH_BYTES
    ? `a Unix socket path may be at most ${MAX_UNIX_SOCKET_PATH_BYTES} bytes (sun_path, unix(7)); this one is ${n}`
    : undefined;
}

/** Why absolute path `p` of `kind` is refused without looking at the disk, or undefined. */
export function literalPathProblem(kind: PathKind, p: string): string | undefined {
  if (!p.startsWith('/') || p.includes('\0')) return `expected ${PATH_ACCEPTS[kind]}`;
  if ((kind === 'file' || kind === 'log' || kind === 'socket') && p.endsWith('/'))
    return `expected ${PATH_ACCEPTS[kind]}, not a directory (it ends with /)`;
  if (kind === 'socket') {
    const why = socketPathTooLong(p);
    if (why) return why;
    if ([...p].some((ch) => ch.charCodeAt(0) > 0x7f)) return `expected ${PATH_ACCEPTS[kind]} (ASCII only)`;
  }
  const fs = kind === 'netns' ? undefined : LITERAL_PSEUDO.exec(p)?.[1];
  if (fs) return `${fs} is a pseudo filesystem and can never hold it; expected ${PATH_ACCEPTS[kind]}`;
  return undefined;
}

/** A path of `kind` (see {@link PathKind}), trimmed, checked by {@link literalPathProblem}. */
export function pathOf(kind: Exclude<PathKind, 'log'>): Field<string> {
  return tagged(
    kind,
    z
      .string()
      .transform(trimBlank)
      .transform((s, ctx) => {
        const why = literalPathProblem(kind, s);
        return why ? fail(ctx, s, why) : s;
      }),
  );
}

/** `stdout` or an absolute file path (AWS_VPC_K8S_CNI_LOG_FILE, as amazon-vpc-cni-k8s reads it); kind `log`. */
export function logTarget(): Field<string> {
  return tagged(
    'log',
    z
      .string()
      .transform(trimBlank)
      .transform((s, ctx) => {
        if (s === 'stdout') return s;
        const why = literalPathProblem('log', s);
        return why ? fail(ctx, s, why) : s;
      }),
  );
}

/** An absolute file path that is not stdout: a CNI plugin's stdout is its result (AWS_VPC_K8S_PLUGIN_LOG_FILE); kind `file`. */
export function pluginLogFile(): Field<string> {
  return tagged(
    'file',
    z
      .string()
      .transform(trimBlank)
      .transform((s, ctx) => {
        if (s === 'stdout')
          return fail(
            ctx,
            s,
            `the plugin cannot log to stdout (its stdout is the CNI result); expected ${PATH_ACCEPTS.file}`,
          );
        const why = literalPathProblem('file', s);
        return why ? fail(ctx, s, why) : s;
      }),
  );
}

/** A CRI socket: `unix:///path` or `/path` (at most 107 bytes); returned as the plain socket path; kind `socket`. */
export function criEndpoint(): Field<string> {
  const accepts = `unix:///path or ${PATH_ACCEPTS.socket}`;
  const msg = `expected ${accepts}`;
  return tagged(
    'socket',
    z
      .string()
      .transform(trimBlank)
      .transform((s, ctx) => {
        const p = s.startsWith('unix://') ? s.slice('unix://'.length) : s;
        if (!p.startsWith('/') || p.length < 2) return fail(ctx, s, msg);
        const why = literalPathProblem('socket', p);
        return why ? fail(ctx, s, why) : p;
      }),
    `(?:unix://)?${PATH_BODY.socket}`,
    accepts,
  );
}
