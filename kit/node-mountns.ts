/**
 * The mount namespace of a simulated node: what containerd, the CNI plugins it execs
 * and the containers it starts see as "the host's" file system.
 *
 * - Node.js is absent: every PATH dir holding `node`/`nodejs` is covered by an overlay
 *   whose upper dir has whiteouts for them (the overlayfs way to delete a lower file), so
 *   `command -v node` finds nothing there, as on an EKS-optimized AMI or Bottlerocket.
 * - The node's well-known paths (`/etc/cni/net.d`, `/opt/cni/bin`, `/var/run/eni-ipam`,
 *   `/run/xtables.lock`, ...) are bind mounts of per-test dirs/files, so a DaemonSet's
 *   hostPath volumes can be used verbatim and the test reads and writes the same files
 *   through `hostPathOf()`.
 * - `/run/netns` stays the host's shared mount (peer group): the pod netns containerd
 *   creates there are visible to the test, which checks pods through them.
 *
 * Only the root mount (and the mount holding each bind target) is made a slave first
 * (then shared in a peer group of its own), so nothing mounted here propagates back to
 * the host. The namespace lives as long as a
 * holder process (`sleep infinity` under `unshare -m`); enter it with `nsenterArgs`.
 * Mount targets the machine does not have are made inside the namespace only, in an overlay
 * of their nearest existing ancestor (`kit/mount-scaffold.ts`): nothing is created, changed
 * or removed at a machine path, so any number of node namespaces (clusters, node harnesses,
 * CI runs) share one machine and closing one never detaches another's binds.
 *
 * Needs root, util-linux (unshare, nsenter, mount, findmnt) and overlayfs.
 */
import { spawn, execFile } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureTargetInNs, type ScaffoldNs } from './mount-scaffold.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);

/** One node path backed by a per-test file or dir. */
export interface NodeBind {
  /** Absolute path on the node (e.g. `/etc/cni/net.d`). */
  nodePath: string;
  /** `dir` (default) or `file`. */
  kind?: 'dir' | 'file';
}

/** A running node mount namespace. */
export interface NodeMountNs {
  /** PID of the holder process; `/proc/<pid>/ns/mnt` is the namespace. */
  pid: number;
  /** `/proc/<pid>/ns/mnt`. */
  nsPath: string;
  /** `/proc/<pid>/ns/uts`: the node's own hostname (only when created with `hostname`). */
  utsPath?: string;
  /** Per-test dir holding the backing files (`<root>/node/<nodePath>`). */
  root: string;
  /** Node paths the binds cover. */
  binds: NodeBind[];
  /** Dirs whose `node` binaries are hidden. */
  hiddenNodeDirs: string[];
  /** `nsenter` arguments entering this mount namespace, and its UTS namespace when it has one (add `--net=` for the node netns). */
  nsenterArgs: string[];
  /**
   * The test-side path of node path `p` when a bind covers it (its backing file), else
   * undefined (then the node sees the host's own path).
   */
  hostPathOf(p: string): string | undefined;
  /** Runs `argv` inside the namespace (mount ns only); resolves with stdout. @throws on non-zero exit. */
  exec(argv: string[]): Promise<string>;
  /** Kills the holder (the namespace and its mounts go when its last process exits) and removes the per-test dir. Idempotent. */
  close(): Promise<void>;
}

/** A node path with `/var/run` spelled `/run` (the same dir on every distribution with a merged /run). */
export function canonicalNodePath(p: string): string {
  const abs = path.resolve(p);
  return abs === '/var/run' || abs.startsWith('/var/run/') ? abs.slice('/var'.length) : abs;
}

/** Where `node`/`nodejs` live on this host (real dirs, deduplicated). */
function nodeDirs(): string[] {
  const dirs = new Set<string>();
  for (const d of [
    '/usr/local/sbin',
    '/usr/local/bin',
    '/usr/sbin',
    '/usr/bin',
    '/sbin',
    '/bin',
    ...(process.env['PATH'] ?? '').split(':'),
  ]) {
    if (!d.startsWith('/')) continue;
    for (const n of ['node', 'nodejs']) {
      try {
        statSync(path.join(d, n));
        dirs.add(realDir(d));
      } catch {
        /* not here */
      }
    }
  }
  return [...dirs];
}

function realDir(d: string): string {
  try {
    return realpathSync(d);
  } catch {
    return d;
  }
}

/** A node mount namespace being set up: what its setup steps share. */
interface MountNsSetup extends ScaffoldNs {
  /** Mounts already made slave (then shared in a peer group of their own). */
  slaved: Set<string>;
}

/** Makes mount `m` a slave of the host's (nothing mounted below reaches the host), then shared again. */
async function slaveMount(s: MountNsSetup, m: string): Promise<void> {
  await s.exec(['mount', '--make-slave', m]);
  await s.exec(['mount', '--make-shared', m]);
  s.slaved.add(m);
}

/** Slaves the mount holding existing path `p` (once), unless it is /run/netns, which stays the host's. */
async function isolateHolding(s: MountNsSetup, p: string): Promise<void> {
  const holding = (await s.exec(['findmnt', '-n', '-o', 'TARGET', '--target', p])).trim();
  if (!s.slaved.has(holding) && !holding.startsWith('/run/netns')) await slaveMount(s, holding);
}

/**
 * Bind-mounts the backing dir or (empty) file of node path `b.nodePath` over it: creates
 * the backing file, the target inside the namespace when the machine lacks it (never on the
 * host: `ensureTargetInNs`), and slaves the mount holding the target first (unless it is
 * /run/netns, which stays the host's).
 */
async function bindNodePath(s: MountNsSetup, b: Required<NodeBind>): Promise<void> {
  const src = path.join(s.root, 'node', b.nodePath);
  await mkdir(b.kind === 'dir' ? src : path.dirname(src), { recursive: true });
  if (b.kind === 'file') await writeFile(src, '', { flag: 'a' });
  await ensureTargetInNs(s, b.nodePath, b.kind);
  await s.isolate(b.nodePath);
  await s.exec(['mount', '--bind', src, b.nodePath]);
  s.bound.add(b.nodePath);
}

/**
 * Covers each dir holding `node`/`nodejs` with an overlay whose upper dir has a whiteout
 * (char device 0:0) for each. @returns the dirs covered.
 */
async function hideNodeBinaries(s: MountNsSetup): Promise<string[]> {
  const hidden = nodeDirs();
  for (const [i, d] of hidden.entries()) {
    const upper = path.join(s.root, `hide-${i}`, 'upper');
    const work = path.join(s.root, `hide-${i}`, 'work');
    await mkdir(upper, { recursive: true });
    await mkdir(work, { recursive: true });
    for (const n of ['node', 'nodejs'])
      if (existsSync(path.join(d, n))) await run('mknod', [path.join(upper, n), 'c', '0', '0']);
    await s.exec(['mount', '-t', 'overlay', 'overlay', '-o', `lowerdir=${d},upperdir=${upper},workdir=${work}`, d]);
  }
  return hidden;
}

/**
 * Closes a node mount namespace: SIGKILLs its holder `pid` unless `exited()` (waiting up
 * to 3 s for `exitP`), then removes the per-test `root`. Nothing at a machine path is
 * removed: the namespace made none.
 */
async function closeMountNs(c: {
  pid: number;
  exited: () => boolean;
  exitP: Promise<void>;
  root: string;
}): Promise<void> {
  if (!c.exited()) {
    try {
      process.kill(c.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await Promise.race([c.exitP, new Promise((r) => setTimeout(r, 3000))]); // a wait for the exit, capped at 3 s
  }
  await rm(c.root, { recursive: true, force: true });
}

/**
 * Creates the namespace.
 * @param o.root per-test dir (created) for the backing files and overlay dirs.
 * @param o.binds node paths to back with per-test files.
 * @param o.hideNode false keeps Node.js on the namespace's PATH (default: hidden, as on an EKS AMI).
 * @param o.hostname given: the holder gets a UTS namespace of its own with this hostname (a
 *   node's: a host-network pod, which shares its node's UTS namespace, sees it, as on a
 *   real node); absent: the machine's UTS namespace.
 * @throws Error (after cleaning up) if unshare/mount fail or Node.js is still found inside.
 */
export async function createNodeMountNs(o: {
  root: string;
  binds: NodeBind[];
  hideNode?: boolean;
  hostname?: string;
}): Promise<NodeMountNs> {
  await mkdir(o.root, { recursive: true });
  const root = await mkdtemp(path.join(o.root, 'mntns-'));
  const uts = o.hostname !== undefined ? ['-u'] : [];
  const holder = spawn('unshare', ['-m', ...uts, '--propagation', 'unchanged', 'sleep', 'infinity'], {
    stdio: 'ignore',
    detached: true,
  });
  holder.unref();
  const pid = holder.pid ?? -1;
  const held = { exited: false };
  const exitP = new Promise<void>((r) => {
    holder.once('exit', () => {
      held.exited = true;
      r();
    });
    holder.once('error', () => {
      held.exited = true;
      r();
    });
  });
  const nsPath = `/proc/${pid}/ns/mnt`;
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => (closing ??= closeMountNs({ pid, exited: () => held.exited, exitP, root }));
  const utsPath = uts.length ? `/proc/${pid}/ns/uts` : undefined;
  const nsenter = ['nsenter', `--mount=${nsPath}`, ...(utsPath ? [`--uts=${utsPath}`] : []), '--'];
  const exec = async (argv: string[]): Promise<string> =>
    (await run(nsenter[0]!, [...nsenter.slice(1), ...argv])).stdout;
  try {
    const self = statSync('/proc/self/ns/mnt').ino;
    await waitFor(
      'the node mount namespace',
      () => !held.exited && existsSync(nsPath) && statSync(nsPath).ino !== self,
      5000,
      20,
    );
    // Nothing mounted below may reach the host: slave the root mount (not recursively:
    // /run/netns must stay in the host's peer group), then make it shared again in a peer
    // group of its own, as a node's root is (systemd), which containerd requires of a
    // hostPath's mount for HostToContainer propagation (it checks the path unresolved:
    // /var/run/netns is "on /").
    const setup: MountNsSetup = {
      root,
      exec,
      slaved: new Set<string>(),
      covered: new Set<string>(),
      bound: new Set<string>(),
      isolate: (p) => isolateHolding(setup, p),
    };
    if (o.hostname !== undefined) await exec(['hostname', o.hostname]);
    await slaveMount(setup, '/');
    const binds = o.binds.map((b) => ({ nodePath: canonicalNodePath(b.nodePath), kind: b.kind ?? ('dir' as const) }));
    for (const b of binds) await bindNodePath(setup, b);
    const hidden = o.hideNode === false ? [] : await hideNodeBinaries(setup);
    const found = await exec([
      'sh',
      '-c',
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH; command -v node nodejs || true',
    ]);
    if (o.hideNode !== false && found.trim()) throw new Error(`node is still on the node's PATH: ${found.trim()}`);
    const hostPathOf = (p: string): string | undefined => {
      const abs = canonicalNodePath(p);
      const b = binds
        .filter((x) => abs === x.nodePath || abs.startsWith(`${x.nodePath}/`))
        .sort((a, c) => c.nodePath.length - a.nodePath.length)[0];
      return b ? path.join(root, 'node', abs) : undefined;
    };
    return {
      pid,
      nsPath,
      ...(utsPath ? { utsPath } : {}),
      root,
      binds,
      hiddenNodeDirs: hidden,
      nsenterArgs: nsenter.slice(1, -1),
      hostPathOf,
      exec,
      close,
    };
  } catch (e) {
    await close().catch(() => undefined);
    throw e;
  }
}

/** Mount points of the mount namespace of process `pid` (from its mountinfo), for diagnostics. */
export function mountsOf(pid: number): string[] {
  return readFileSync(`/proc/${pid}/mountinfo`, 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter(Boolean);
}
