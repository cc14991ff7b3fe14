/**
 * What a private containerd leaves on the host, read from /proc and cgroupfs (Linux):
 * its processes and their children, netns handles, mounts under a dir, and `k8s.io`
 * cgroup dirs; used by containerd.ts to stop it and to check nothing is left.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import path from 'node:path';

/** `k8s.io` cgroup dirs (v1 per controller, or v2) that exist now. */
export function k8sCgroupDirs(): Set<string> {
  const out = new Set<string>();
  const root = '/sys/fs/cgroup';
  if (existsSync(path.join(root, 'k8s.io'))) out.add(path.join(root, 'k8s.io'));
  try {
    for (const c of readdirSync(root)) {
      const p = path.join(root, c, 'k8s.io');
      if (existsSync(p)) out.add(p);
    }
  } catch {
    /* no cgroupfs */
  }
  return out;
}

/** Removes an (empty-leaved) cgroup tree depth first; cgroup dirs can only be rmdir'ed. */
export async function rmdirTree(dir: string): Promise<void> {
  let entries: string[] = [];
  try {
    entries = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return;
  }
  for (const e of entries) await rmdirTree(path.join(dir, e));
  await rmdir(dir).catch(() => undefined);
}

/** PIDs (with cmdline) of every process whose cmdline contains all of `needles`. */
export function findProcesses(needles: string[]): { pid: number; argv: string[] }[] {
  const out: { pid: number; argv: string[] }[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      const line = argv.join(' ');
      if (needles.every((n) => line.includes(n))) out.push({ pid: Number(d), argv });
    } catch {
      /* exited */
    }
  }
  return out;
}

/** Direct children of `pid` (from /proc/<n>/stat field 4). */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(d));
    } catch {
      /* exited */
    }
  }
  return out;
}

/** nsfs inode of a network namespace handle (`/proc/<pid>/ns/net` or a bind mount), or -1. */
export function netnsInode(p: string): number {
  try {
    return statSync(p).ino;
  } catch {
    return -1;
  }
}

/** Whether process `pid` exists (signal 0). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Mount points under `dir` (from /proc/self/mountinfo, octal escapes decoded), deepest first. */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((m): m is string => !!m)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m) => m === dir || m.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
}
