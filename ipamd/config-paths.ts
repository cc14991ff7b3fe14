/**
 * The one on-disk check of every path-valued setting (docs/design.md#bounds-on-bad-input),
 * run once at start before ipamd opens, creates or binds anything. Which settings are
 * paths comes from the config spec itself (`pathKindOf` of each variable's schema, see
 * config-path-fields.ts), so a path variable added later is checked without a list here.
 *
 * For each path: the nearest existing ancestor is resolved through symlinks (realpath) and
 * the rest appended; the result must not be under /proc, /sys or /dev (ipamd's recursive
 * mkdir used to spin on such paths at one core and ignore SIGTERM), and an ancestor that
 * exists must be a directory. What already exists at the path must be what the kind needs:
 * a directory for `dir`, a regular file for `file` and `log` (a FIFO would wedge the log
 * writer, a directory fails every write), not a directory for `socket`. `netns` paths live
 * under /proc by nature and are left to the code that opens them.
 */
import { lstatSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { pseudoFsOf } from '../nodefs/dirs.js';
import { PATH_ACCEPTS, pathKindOf, type PathKind } from './config-path-fields.js';
import type { VarSpec } from './config-spec.js';
import { ConfigError, type IpamdConfig } from './config-types.js';

/** A path setting as the spec declares it: variable, config key and kind. */
export interface PathSetting {
  name: string;
  key: keyof IpamdConfig;
  kind: PathKind;
}

/** The path-valued variables of `specs` (those whose schema carries a {@link PathKind}), in spec order. */
export function pathSettings(specs: readonly VarSpec[]): PathSetting[] {
  const out: PathSetting[] = [];
  for (const s of specs) {
    const kind = pathKindOf(s.field);
    if (kind) out.push({ name: s.name, key: s.key, kind });
  }
  return out;
}

const statOrUndefined = (p: string, follow: boolean): Stats | undefined => {
  try {
    return follow ? statSync(p) : lstatSync(p);
  } catch {
    return undefined;
  }
};

/**
 * Where absolute path `p` leads: the realpath of its nearest existing ancestor with the
 * missing rest appended (`/var/run/x` with `/var/run` → `/run` gives `/run/x`).
 * @returns `{ real }`, or `{ blocked }` naming an existing ancestor that is not a directory.
 */
export function resolveThroughExisting(p: string): { real: string } | { blocked: string } {
  const rest: string[] = [];
  let d = path.resolve(p);
  for (;;) {
    if (statOrUndefined(d, false)) {
      let real: string;
      try {
        real = realpathSync(d);
      } catch {
        return { blocked: d }; // a dangling symlink, or a loop of them
      }
      if (rest.length && !statOrUndefined(real, true)?.isDirectory()) return { blocked: d };
      return { real: path.join(real, ...rest) };
    }
    if (path.dirname(d) === d) return { real: path.join('/', ...rest) };
    rest.unshift(path.basename(d));
    d = path.dirname(d);
  }
}

/** Why the path `p` of `kind` cannot work on this node, or undefined. */
export function pathProblemOnDisk(kind: PathKind, p: string): string | undefined {
  if (kind === 'netns') return undefined;
  const r = resolveThroughExisting(p);
  if ('blocked' in r) return `${JSON.stringify(r.blocked)} is in the way and is not a directory`;
  const fs = pseudoFsOf(r.real);
  if (fs) return `it resolves to ${JSON.stringify(r.real)} under ${fs}, a pseudo filesystem that can never hold it`;
  const st = statOrUndefined(r.real, true);
  if (!st) return undefined;
  if (kind === 'dir' && !st.isDirectory()) return 'it exists and is not a directory';
  if ((kind === 'file' || kind === 'log') && st.isDirectory()) return 'it is a directory; expected a file path';
  if ((kind === 'file' || kind === 'log') && !st.isFile()) return 'it exists and is not a regular file';
  if (kind === 'socket' && st.isDirectory()) return 'it is a directory; expected a socket path';
  return undefined;
}

/**
 * Checks every path setting of `specs` in the validated config `c` on disk (see the module
 * docstring). `AWS_VPC_K8S_CNI_LOG_FILE=stdout` is not a path and passes.
 * @throws ConfigError with one line: the variable, its value, why, and what is accepted.
 */
export function checkPathSettings(c: IpamdConfig, specs: readonly VarSpec[]): void {
  for (const s of pathSettings(specs)) {
    const value = c[s.key];
    if (typeof value !== 'string' || (s.kind === 'log' && value === 'stdout')) continue;
    const why = pathProblemOnDisk(s.kind, value);
    if (why)
      throw new ConfigError(
        s.name,
        `${s.name}=${JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value)} is invalid: ${why}; expected ${PATH_ACCEPTS[s.kind]}`,
      );
  }
}
