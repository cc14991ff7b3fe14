/**
 * Runs a command in a private mount namespace in which no `node` binary exists, as on an
 * EKS-optimized AMI or Bottlerocket host: every directory holding `node` (as found by
 * `command -v node` and this process's `process.execPath`, symlinks resolved) gets an
 * empty tmpfs mounted over it (`unshare --mount --propagation private`; /usr/bin last,
 * since `mount` itself lives there). The wrapper checks that `node` is really absent
 * (exit 98 otherwise) before it execs the command by absolute path.
 */
import { execFileSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import path from 'node:path';

/** Exit code of the wrapper when `node` is still reachable inside the namespace. */
export const NODE_STILL_PRESENT = 98;

/** The directories that hold `node` on this machine (sorted so /usr/bin and /bin come last). */
export function nodeDirs(): string[] {
  const found = new Set<string>();
  const add = (p: string) => {
    found.add(path.dirname(p));
    try {
      found.add(path.dirname(realpathSync(p)));
    } catch {
      /* gone */
    }
  };
  add(process.execPath);
  try {
    add(execFileSync('sh', ['-c', 'command -v node'], { encoding: 'utf8' }).trim());
  } catch {
    /* not on PATH */
  }
  const last = (d: string) => (d === '/usr/bin' || d === '/bin' ? 1 : 0);
  return [...found].sort((a, b) => last(a) - last(b) || a.localeCompare(b));
}

/**
 * argv that runs `argv` without Node (see the module docstring). `hide: false` skips the
 * mounts (the presence check must then fail with {@link NODE_STILL_PRESENT}: a test of the check).
 */
export function withoutNode(argv: string[], hide = true): string[] {
  const mounts = !hide
    ? ''
    : nodeDirs()
        .map((d) => `mount -t tmpfs -o size=1m none ${d} || exit 97;`)
        .join(' ');
  const files = nodeDirs()
    .map((d) => `${d}/node`)
    .join(' ');
  const script =
    `${mounts} present=; for f in ${files}; do [ -e "$f" ] && present=1; done; command -v node >/dev/null 2>&1 && present=1; ` +
    `if [ -n "$present" ]; then echo 'node is still present' >&2; exit ${NODE_STILL_PRESENT}; fi; exec "$@"`;
  return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', script, 'sh', ...argv];
}
