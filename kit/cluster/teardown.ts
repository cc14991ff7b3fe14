/**
 * The last resort of the cluster's teardown: every process still in the node's mount
 * namespace (containerd shims, pause and workload containers, a kubelet that would not
 * stop) is killed, so the namespace and every mount made in it go with its holder.
 */
import { readdirSync, readlinkSync } from 'node:fs';
import type { NodeMountNs } from '../node-mountns.js';
import { waitFor } from '../wait.js';

/** PIDs whose mount namespace is `nsPath`'s, except `except`. */
export function pidsInMountNs(nsPath: string, except: number): number[] {
  let target: string;
  try {
    target = readlinkSync(nsPath);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === except) continue;
    try {
      if (readlinkSync(`/proc/${d}/ns/mnt`) === target) out.push(Number(d));
    } catch {
      /* gone or a kernel thread */
    }
  }
  return out;
}

/** SIGKILLs every process in `ns` but its holder and waits (≤ 10 s) until none is left. */
export async function killMountNsProcesses(ns: NodeMountNs): Promise<void> {
  const left = (): number[] => pidsInMountNs(ns.nsPath, ns.pid);
  for (const pid of left()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await waitFor(
    'the node mount namespace to have no process but its holder',
    () => left().length === 0,
    10_000,
    100,
  ).catch(() => undefined);
}
