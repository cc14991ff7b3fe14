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
 * writer, a directory fails every write), not a directory for `socket`. A path that
 * reaches a pseudo filesystem another way (a bind mount of /proc) is found by statfs(2).
 * `netns` paths live under /proc by nature: they must open as a network namespace.
 */
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  statfsSync,
  statSync,
  type Stats,
} from 'node:fs';
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
export function resolveThroughExisting(p: string): { real: string; base?: string } | { blocked: string } {
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
      return { real: path.join(real, ...rest), base: real };
    }
    if (path.dirname(d) === d) return { real: path.join('/', ...rest) };
    rest.unshift(path.basename(d));
    d = path.dirname(d);
  }
}

/**
 * Filesystems that can never hold a file, directory or socket ipamd makes, by statfs(2)
 * f_type (linux/magic.h): found whatever path leads there, a bind mount of /proc included.
 */
const PSEUDO_FS_MAGIC: ReadonlyMap<number, string> = new Map([
  [0x9fa0, 'proc'],
  [0x62656572, 'sysfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0xcafe4a11, 'bpf'],
  [0x62656570, 'configfs'],
  [0x6165676c, 'pstore'],
  [0xde5e81e4, 'efivarfs'],
  [0x1cd1, 'devpts'],
  [0x6e736673, 'nsfs'],
  [0x65735543, 'fusectl'],
  [0xf97cff8c, 'selinuxfs'],
  [0x42494e4d, 'binfmt_misc'],
]);

/** The pseudo filesystem (by statfs f_type) holding existing path `p`, or undefined. */
export function pseudoFsTypeOf(p: string): string | undefined {
  try {
    return PSEUDO_FS_MAGIC.get(Number(statfsSync(p).type));
  } catch {
    return undefined;
  }
}

/**
 * The namespace type (`net`, `mnt`, ...) of an nsfs file bind-mounted at `p` (as `ip netns add`
 * and containerd make them), read from this process's mountinfo: the mount's root field is
 * `net:[4026531993]`. Undefined when no mount sits at `p`.
 */
function boundNsType(p: string): string | undefined {
  let real: string;
  try {
    real = realpathSync(p);
  } catch {
    return undefined;
  }
  let found: string | undefined;
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    // Fields: id parent major:minor root mountpoint ... (proc(5)); the last mount at a path wins.
    const mountPoint = f[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    if (mountPoint === real) found = /^([a-z_]+):\[[0-9]+\]$/.exec(f[3] ?? '')?.[1];
  }
  return found;
}

/**
 * Why `p` is not a network namespace file, or undefined. `p` is opened (non-blocking, so a
 * FIFO cannot hang the start); its namespace type comes from the kernel's name of the open
 * file (`/proc/<pid>/ns/net` reads `net:[4026531993]`) or, for a bind mount of one (the
 * `/run/netns/<name>` of `ip netns add`, whose open file reads back as its path), from the
 * nsfs filesystem (statfs(2) magic NSFS_MAGIC) and the mount's root in /proc/self/mountinfo.
 */
export function netnsProblem(p: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(p, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? 'it does not exist' : `it cannot be opened (${code ?? String(e)})`;
  }
  try {
    const link = readlinkSync(`/proc/self/fd/${fd}`);
    let ns = /^([a-z_]+):\[[0-9]+\]$/.exec(link)?.[1];
    if (!ns && pseudoFsTypeOf(p) === 'nsfs') ns = boundNsType(p) ?? 'net';
    if (ns === 'net') return undefined;
    const st = fstatSync(fd);
    const what = ns
      ? `a ${ns} namespace`
      : st.isDirectory()
        ? 'a directory'
        : st.isFile()
          ? 'a regular file'
          : 'not a namespace file';
    return `it is ${what}, not a network namespace`;
  } finally {
    closeSync(fd);
  }
}

/** Why the path `p` of `kind` cannot work on this node, or undefined. */
export function pathProblemOnDisk(kind: PathKind, p: string): string | undefined {
  if (kind === 'netns') return netnsProblem(p);
  const r = resolveThroughExisting(p);
  if ('blocked' in r) return `${JSON.stringify(r.blocked)} is in the way and is not a directory`;
  const fs = pseudoFsOf(r.real);
  if (fs) return `it resolves to ${JSON.stringify(r.real)} under ${fs}, a pseudo filesystem that can never hold it`;
  const type = r.base === undefined ? undefined : pseudoFsTypeOf(r.base);
  if (type)
    return `it resolves to ${JSON.stringify(r.real)} on a ${type} filesystem (${JSON.stringify(r.base)} is mounted from one), a pseudo filesystem that can never hold it`;
  const st = statOrUndefined(r.real, true);
  if (!st) return undefined;
  if (kind === 'dir' && !st.isDirectory()) return 'it exists and is not a directory';
  if ((kind === 'file' || kind === 'log') && st.isDirectory()) return 'it is a directory; expected a file path';
  if ((kind === 'file' || kind === 'log') && !st.isFile()) return 'it exists and is not a regular file';
  if (kind === 'socket' && st.isDirectory()) return 'it is a directory; expected a socket path';
  return undefined;
}

/**
 * The path setting an error at start is about: the variable of `specs` whose value in `c`
 * is the error's path, lies under it (a parent ipamd failed to create) or holds it (a file
 * in a configured directory). ipamd-main prefixes the error with it, so every path error
 * at start names the variable (docs/troubleshooting.md).
 */
export function pathSettingOfError(
  e: unknown,
  c: IpamdConfig,
  specs: readonly VarSpec[],
): { name: string; value: string } | undefined {
  const errPath = (e as NodeJS.ErrnoException | undefined)?.path;
  if (typeof errPath !== 'string' || errPath === '') return undefined;
  const under = (a: string, b: string) => a === b || a.startsWith(b.endsWith('/') ? b : `${b}/`);
  for (const s of pathSettings(specs)) {
    const value = c[s.key];
    if (typeof value !== 'string' || value === 'stdout') continue;
    if (under(errPath, value) || under(value, errPath)) return { name: s.name, value };
  }
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
