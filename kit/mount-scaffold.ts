/**
 * Mount targets a node mount namespace needs but the machine does not have, made without
 * touching the machine: the nearest directory that exists (say `/run` for
 * `/run/eni-ipam`, `/opt` for `/opt/cni/bin`) is covered, inside the namespace only, by an
 * overlay whose lower layer is that directory itself and whose upper layer is the
 * harness's own dir; the missing path is then created in the overlay (its upper layer),
 * never on the host.
 *
 * Why not create the target on the host and remove it at close: since Linux 3.18, removing a
 * directory that is a mount point in another mount namespace succeeds and silently detaches
 * that namespace's mounts, so one harness closing took every other live harness's binds
 * with it (and those then wrote into the machine's own `/etc/cni/net.d`, `/run/eni-ipam`, …).
 *
 * The overlay's lower layer is live: what the host adds to the directory later is seen
 * inside. The mounts below the covered directory (e.g. `/run/netns`, shared with the host
 * so the tests see pod namespaces) are bound back over the overlay first, so they keep their
 * peer groups (a bind of a shared mount joins its peer group).
 *
 * Needs root, overlayfs and util-linux (mount, findmnt).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** What the scaffold needs of a node mount namespace being set up. */
export interface ScaffoldNs {
  /** The harness's own dir for the overlays' upper and work dirs. */
  root: string;
  /** Runs `argv` inside the namespace (mount namespace only); resolves with stdout. @throws on non-zero exit. */
  exec(argv: string[]): Promise<string>;
  /** Directories already covered by an overlay of ours (shared across calls). */
  covered: Set<string>;
  /** Node paths already bound to the harness's own files (creating below them writes those). */
  bound: Set<string>;
  /** Makes the mount holding `dir` unable to propagate anything to the host (a slave); idempotent. */
  isolate(dir: string): Promise<void>;
}

/** True when `p` exists in the namespace's view (it may differ from the host's once covered). */
async function existsInNs(s: ScaffoldNs, p: string): Promise<boolean> {
  try {
    await s.exec(['test', '-e', p]);
    return true;
  } catch {
    return false;
  }
}

/** True when `p` is a directory in the namespace's view. */
async function isDirInNs(s: ScaffoldNs, p: string): Promise<boolean> {
  try {
    await s.exec(['test', '-d', p]);
    return true;
  } catch {
    return false;
  }
}

/** The mount points strictly below `dir` in the namespace, shallowest first (their own order in the mount table). */
async function mountsBelow(s: ScaffoldNs, dir: string): Promise<string[]> {
  const out = await s.exec(['findmnt', '-rn', '-o', 'TARGET']);
  const prefix = dir === '/' ? '/' : `${dir}/`;
  const below = out
    .split('\n')
    .map((l) => l.trim().replace(/\\x20/g, ' '))
    .filter((t) => t.startsWith(prefix) && t !== dir);
  // Only the topmost ones: an rbind carries the mounts below them along.
  return [...new Set(below)].filter((t) => !below.some((o) => o !== t && t.startsWith(`${o}/`)));
}

/**
 * Covers `dir` (which exists in the namespace) with an overlay of itself whose upper layer is
 * `<root>/scaffold-<n>/upper`, keeping the mounts below it (bound back over the overlay).
 * @throws Error from mount.
 */
async function cover(s: ScaffoldNs, dir: string): Promise<void> {
  const base = path.join(s.root, `scaffold-${s.covered.size}`);
  const [upper, work, keep] = ['upper', 'work', 'keep'].map((d) => path.join(base, d)) as [string, string, string];
  for (const d of [upper, work, keep]) await mkdir(d, { recursive: true });
  const subs = await mountsBelow(s, dir);
  const kept: Array<[string, string]> = [];
  for (const [i, m] of subs.entries()) {
    const k = path.join(keep, String(i));
    // A bind of a file (ours: /run/xtables.lock) keeps on a file, a dir's on a dir.
    if (await isDirInNs(s, m)) await mkdir(k);
    else await writeFile(k, '');
    await s.exec(['mount', '--rbind', m, k]);
    kept.push([k, m]);
  }
  await s.exec(['mount', '-t', 'overlay', 'overlay', '-o', `lowerdir=${dir},upperdir=${upper},workdir=${work}`, dir]);
  for (const [k, m] of kept) {
    await s.exec(['mount', '--rbind', k, m]);
    // Out of the host's peer group before it goes: unmounting a peer of the host's /run/netns
    // (and its nsfs children) would propagate the unmount to the host.
    await s.exec(['mount', '--make-rprivate', k]);
    await s.exec(['umount', '-l', k]);
  }
  s.covered.add(dir);
}

/**
 * Makes node path `target` exist inside the namespace as an empty `kind` (dir or file),
 * creating it (and its missing parents) in an overlay of its nearest existing ancestor, never
 * on the host. A target that exists already is left as it is.
 * @throws Error from mount or mkdir.
 */
export async function ensureTargetInNs(s: ScaffoldNs, target: string, kind: 'dir' | 'file'): Promise<void> {
  if (await existsInNs(s, target)) return;
  let anc = path.dirname(target);
  while (anc !== '/' && !(await existsInNs(s, anc))) anc = path.dirname(anc);
  // The ancestor is ours already when it lies in one of our overlays (or in a bind of ours:
  // then creating in it writes the harness's own backing dir).
  const ours = [...s.covered, ...s.bound].some((c) => anc === c || anc.startsWith(`${c}/`));
  if (!ours) {
    await s.isolate(anc);
    await cover(s, anc);
  }
  if (kind === 'dir') await s.exec(['mkdir', '-p', target]);
  else {
    await s.exec(['mkdir', '-p', path.dirname(target)]);
    await s.exec(['sh', '-c', ': >>"$1"', 'sh', target]);
  }
}
