/**
 * The stop of a private containerd started by containerd.ts (`Containerd.stop()`):
 * sandboxes through the CRI, containerd itself, shims it left, mounts under its base dir,
 * the pod netns mounts its sandboxes used, its files, cgroups and the mount namespace made for it.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { CriTestClient } from './cri-client.js';
import type { NodeMountNs } from './node-mountns.js';
import { alive, childrenOf, findProcesses, k8sCgroupDirs, mountsUnder, netnsInode, rmdirTree } from './host-scan.js';

const run = promisify(execFile);

/** Resolves when `p` settles or after `ms`, whichever is first; the timer never outlives it. */
async function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      p,
      new Promise<void>((r) => {
        timer = setTimeout(r, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A started containerd: its process, and what `stop()` must undo. */
export interface ContainerdRun {
  /** Absolute base dir (root, state, opt, config, log, socket). */
  baseDir: string;
  /** Absolute path of its gRPC socket. */
  socket: string;
  /** PID of the `nsenter … containerd` child (-1 if the spawn failed). */
  pid: number;
  /** True once the child has exited or failed to spawn (set by its listeners). */
  exited: boolean;
  /** Settles when `exited` becomes true. */
  exitP: Promise<void>;
  /** The k8s cgroup dirs that existed before the start (never removed). */
  cgroupsBefore: Set<string>;
  /** Test-side path of the runc root containerd's shims use (`/run/containerd/runc/k8s.io` in its mount namespace). */
  runcRoot: string;
  /** The mount namespace made for this containerd (closed at the end of the stop), if the caller gave none. */
  ownMountNs?: NodeMountNs;
  /** Pod netns mount paths of its sandboxes, found during the stop (removed at its end). */
  netnsSeen: Set<string>;
  /** nsfs inodes of the sandbox processes of killed shims. */
  netnsInodes: Set<number>;
}

/** Stop step 1: every sandbox through the CRI (StopPodSandbox + RemovePodSandbox), remembering its netns. */
async function removeSandboxesViaCri(s: ContainerdRun, problems: string[]): Promise<void> {
  if (s.exited || !existsSync(s.socket)) return;
  const cri = new CriTestClient(s.socket, 30_000);
  try {
    for (const sb of await cri.listPodSandbox()) {
      const ns = await cri.netnsPath(sb.id).catch(() => undefined);
      if (ns) s.netnsSeen.add(ns);
      try {
        await cri.stopPodSandbox(sb.id);
        await cri.removePodSandbox(sb.id);
      } catch (e) {
        problems.push(`sandbox ${sb.id}: ${(e as Error).message}`);
      }
    }
  } catch (e) {
    problems.push(`ListPodSandbox: ${(e as Error).message}`);
  } finally {
    cri.close();
  }
}

/** Stop step 2: SIGTERM containerd, SIGKILL after 5 s, give up after 2 s more. */
async function killContainerd(s: ContainerdRun, problems: string[]): Promise<void> {
  const { pid } = s;
  if (!s.exited && pid > 0) {
    process.kill(pid, 'SIGTERM');
    await settledWithin(s.exitP, 5000);
    if (!s.exited) {
      process.kill(pid, 'SIGKILL');
      await settledWithin(s.exitP, 2000);
    }
  }
  if (pid > 0 && alive(pid) && !s.exited) problems.push(`containerd pid ${pid} still alive`);
}

/**
 * Stop step 3 (only does anything when step 1 failed): SIGKILLs each shim left on the
 * socket and its sandbox processes (their netns inodes kept), `runc delete --force`s its
 * container, then adds the `/var/run/netns/cni-*` mounts of those namespaces to `netnsSeen`.
 */
async function killLeftShims(s: ContainerdRun): Promise<void> {
  for (const shim of findProcesses(['containerd-shim', '-address', s.socket])) {
    for (const c of childrenOf(shim.pid)) {
      const ino = netnsInode(`/proc/${c}/ns/net`);
      if (ino > 0) s.netnsInodes.add(ino);
      try {
        process.kill(c, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    try {
      process.kill(shim.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    const i = shim.argv.indexOf('-id');
    const id = i >= 0 ? shim.argv[i + 1] : undefined;
    if (id) await run('runc', ['--root', s.runcRoot, 'delete', '--force', id]).catch(() => undefined);
  }
  // The pod netns of sandboxes whose shim had to be killed: /var/run/netns/cni-* bind
  // mounts of the same namespace (same nsfs inode) as their pause process.
  if (s.netnsInodes.size) {
    const names = existsSync('/var/run/netns') ? readdirSync('/var/run/netns') : [];
    for (const n of names.filter((x) => x.startsWith('cni-'))) {
      const p = path.join('/var/run/netns', n);
      if (s.netnsInodes.has(netnsInode(p))) s.netnsSeen.add(p);
    }
  }
}

/**
 * The whole stop of a started containerd (see {@link Containerd.stop}), in order:
 * sandboxes, containerd, left shims, mounts under baseDir, pod netns mounts, files,
 * cgroups and the mount namespace made for it. @throws Error listing what could not be cleaned up.
 */
export async function cleanUpContainerd(s: ContainerdRun): Promise<void> {
  const { baseDir } = s;
  const problems: string[] = [];
  // 1. sandboxes through the CRI, remembering their netns.
  await removeSandboxesViaCri(s, problems);
  // 2. containerd itself.
  await killContainerd(s, problems);
  // 3. shims left behind (only when step 1 failed): kill the sandbox processes, then the shim.
  await killLeftShims(s);
  // 4. mounts under baseDir (rootfs overlays, sandbox shm), deepest first.
  for (const m of mountsUnder(baseDir)) {
    await run('umount', ['-l', m]).catch((e: Error) => problems.push(`umount ${m}: ${e.message}`));
  }
  // 5. pod netns mounts this containerd created and did not remove.
  for (const ns of s.netnsSeen) {
    if (!existsSync(ns)) continue;
    await run('umount', [ns]).catch(() => undefined);
    await unlink(ns).catch((e: Error) => problems.push(`rm ${ns}: ${e.message}`));
  }
  // 6. its mount namespace, files, cgroups.
  await s.ownMountNs?.close().catch((e: Error) => problems.push(`mount namespace: ${e.message}`));
  await rm(baseDir, { recursive: true, force: true }).catch((e: Error) => problems.push(`rm ${baseDir}: ${e.message}`));
  for (const c of k8sCgroupDirs()) if (!s.cgroupsBefore.has(c)) await rmdirTree(c);
  if (problems.length) throw new Error(`containerd cleanup incomplete:\n  ${problems.join('\n  ')}`);
}
