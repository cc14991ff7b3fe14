/**
 * Small helpers shared by the warm-pool benchmarks: EC2 call tallies from the simulated
 * cloud's call log, pacing, markdown table rows, a seeded checkpoint file, the plugin's
 * gRPC client as a bench client, a child process's CPU time, and an ENI for a datastore.
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connectIpamd } from '../cni-plugin/ipamd-client.js';
import { SessionPool } from '../cni-plugin/grpc-http2.js';
import { readBootId } from '../ipamd/checkpoint/index.js';
import { IPAM_API_VERSION } from '../proto/ipam.js';
import type { EniInfo } from '../ipamd/datastore/types.js';
import type { ApiCallRecord } from '../sim/index.js';

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** EC2 calls by action (failed calls included), sorted by action name. */
export function callsByAction(calls: readonly ApiCallRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const c of calls) m.set(c.action, (m.get(c.action) ?? 0) + 1);
  return new Map([...m].sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** True for the actions EC2 throttles in its mutating class (everything but Describe*). */
export function isMutating(action: string): boolean {
  return !action.startsWith('Describe');
}

/** Calls answered with `RequestLimitExceeded`. */
export function throttledCalls(calls: readonly ApiCallRecord[]): number {
  return calls.filter((c) => c.errorCode === 'RequestLimitExceeded').length;
}

/** A markdown table row. */
export function row(cells: Array<string | number>): string {
  return `| ${cells.join(' | ')} |`;
}

/** Resident set size of this process in MiB. */
export function rssMiB(): number {
  return Math.round(process.memoryUsage().rss / 2 ** 20);
}

/** `yyyy-mm-dd, N vCPU, Node vX` for the header line of a bench. */
export function machineLine(cpus: number): string {
  return `${new Date().toISOString().slice(0, 10)}, ${cpus} vCPU, Node ${process.version}`;
}

/**
 * Writes a checkpoint of this boot (ipamd/checkpoint format, version 1) at `file` with no
 * allocation and `n` remembered DELs (the datastore keeps at most 4096,
 * RELEASED_CONTAINERS_KEPT): the state of a node after `n` pod deletions, so a bench starts
 * in that steady state instead of filling it while it measures.
 */
export async function seedReleasedCheckpoint(file: string, n: number): Promise<void> {
  const released = Array.from({ length: n }, (_, i) => ({
    containerID: `gone${String(i).padStart(60, '0')}`,
    releasedAt: Date.now() - 60_000 + i,
  }));
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, JSON.stringify({ version: 1, bootId: readBootId(), allocations: [], cooldown: [], released }));
}

/**
 * The clients as the plugin code's own gRPC client (cni-plugin/ipamd-client.ts: protobuf
 * codecs and node:http2, one shared session) instead of grpc-js: ADD/DEL by container id.
 */
export function pluginClient(socketPath: string): {
  add(id: string): Promise<unknown>;
  del(id: string): Promise<unknown>;
  close(): void;
} {
  const pool = new SessionPool();
  const c = connectIpamd(socketPath, pool);
  const req = (id: string) => ({
    api_version: IPAM_API_VERSION,
    client_version: 'bench',
    container_id: id,
    if_name: 'eth0',
    network_name: 'aws-cni',
    netns: `/var/run/netns/cni-${id}`,
    k8s_pod_name: `pod-${id}`,
    k8s_pod_namespace: 'default',
    k8s_pod_infra_container_id: id,
    k8s_pod_uid: `uid-${id}`,
  });
  return {
    add: (id) => c.addNetwork(req(id), 30_000),
    del: (id) => c.delNetwork({ ...req(id), reason: '' }, 30_000),
    close: () => {
      c.close();
      pool.close();
    },
  };
}

/** CPU time (user + system, ms) process `pid` used so far, from /proc/<pid>/stat (clock ticks of 10 ms); undefined if unreadable. */
export function cpuMsOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime, stime (fields 14, 15); CLK_TCK 100 on Linux
  } catch {
    return undefined;
  }
}

/**
 * An ENI for a bench's in-memory datastore: device number `device` (the primary at 0), id
 * `eni-<device>` padded to EC2's 17 hex digits, in subnet-1 (10.0.0.0/8), `capacity`
 * addresses (secondary IPs or /28 prefixes, per the datastore's unit).
 */
export function benchEni(device: number, capacity: number): EniInfo {
  return {
    eniId: `eni-${String(device).padStart(17, '0')}`,
    mac: `02:00:00:00:00:${device.toString(16).padStart(2, '0')}`,
    deviceNumber: device,
    subnetId: 'subnet-1',
    subnetCidr: '10.0.0.0/8',
    primaryIp: `10.${device}.255.1`,
    isPrimary: device === 0,
    createdAtMs: 0,
    capacity,
  };
}
