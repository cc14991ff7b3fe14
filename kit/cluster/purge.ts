/**
 * Removes what a test cluster left behind when its owner died before `close()`: every
 * process in its network namespaces (`eni-k8s-*`, `eni-k8sv-*` of a dead owner) or naming
 * its dir, the mounts under its dir, the namespaces, its kubelet cgroups (only when no
 * other cluster runs) and the dir itself.
 * Safe to run when nothing is left (then it does nothing).
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { mountsUnder } from '../host-scan.js';
import { alive } from './daemon-process.js';
import { CGROUP_PREFIX, removeCgroupRoot } from './node-processes.js';

const run = promisify(execFile);

/**
 * The test clusters' network namespaces whose owner is dead: they are named
 * `eni-k8s-<owner pid>-<n>` and `eni-k8sv-<owner pid>`, and a live owner's (another test
 * run, a running supervisor) are never touched.
 */
function clusterNetns(): string[] {
  try {
    return readdirSync('/var/run/netns').filter((n) => {
      const m = /^eni-k8sv?-(\d+)(?:-\d+)?$/.exec(n);
      return !!m && !alive(Number(m[1]));
    });
  } catch {
    return [];
  }
}

/**
 * PIDs whose cmdline names `dir`, or whose mount namespace has mounts from `dir` (the node
 * mount namespace's holder and what runs in it), other than this process's own namespace.
 */
function pidsOf(dir: string): number[] {
  const out: number[] = [];
  const own = readFileSync('/proc/self/mountinfo', 'utf8').includes(dir);
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dir)) out.push(Number(d));
      else if (!own && readFileSync(`/proc/${d}/mountinfo`, 'utf8').includes(dir)) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

const kill = (pids: number[]): void => {
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
};

/** See the module docstring. @param dir the cluster's dir, when known. */
export async function purgeLeftovers(dir?: string): Promise<void> {
  for (const ns of clusterNetns()) {
    const pids = await run('ip', ['netns', 'pids', ns]).then(
      (r) => r.stdout.split(/\s+/).filter(Boolean).map(Number),
      () => [] as number[],
    );
    kill(pids);
  }
  if (dir) kill(pidsOf(dir));
  if (dir && existsSync(dir)) {
    for (const m of mountsUnder(dir)) await run('umount', ['-l', m]).catch(() => undefined);
  }
  for (const ns of clusterNetns()) await run('ip', ['netns', 'del', ns]).catch(() => undefined);
  // Kubelet cgroup roots of dead owners (`/eni-ipam-k8s-<pid>[-n<index>]` in every hierarchy).
  const list = (d: string): string[] => {
    try {
      return readdirSync(d);
    } catch {
      return [];
    }
  };
  for (const c of list('/sys/fs/cgroup')) {
    for (const g of list(path.join('/sys/fs/cgroup', c))) {
      const m = new RegExp(`^${CGROUP_PREFIX}(\\d+)(?:-n\\d+)?$`).exec(g);
      if (m && !alive(Number(m[1]))) await removeCgroupRoot(`/${g}`);
    }
  }
  if (dir) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}
