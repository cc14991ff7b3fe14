/**
 * The cluster tests' "nothing lost" check and their way of killing ipamd.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { ipIn } from '../netns.js';
import { waitFor } from '../wait.js';
import type { TestCluster } from './cluster.js';
import { allocations, eniOf, podNetns, podsOf } from './workload.js';

/**
 * Asserts, once ipamd's allocations settle (≤ 3 min, leaked ones are released after the GC
 * grace): every live pod of `app` has a unique IP, its eth0 carries it, ipamd holds exactly
 * the live pods' IPs, each for its pod, on the ENI EC2 has it on; and every pod named in
 * `ipAtStart` that still lives kept its IP.
 * @throws AssertionError naming the first difference.
 */
export async function checkNothingLost(c: TestCluster, app: string, ipAtStart: Map<string, string>): Promise<void> {
  const pods = (await podsOf(c, app)).filter((p) => !p.deleting);
  const ips = pods.map((p) => p.ip!);
  assert.equal(new Set(ips).size, ips.length, `no IP twice: ${ips.join(' ')}`);
  for (const p of pods) if (ipAtStart.has(p.name)) assert.equal(p.ip, ipAtStart.get(p.name), `${p.name} kept its IP`);
  const ns = await podNetns(c);
  for (const p of pods) {
    const path = ns.get(p.name);
    assert.ok(path, `${p.name} has a sandbox netns`);
    const out = await ipIn(path, ['-4', '-o', 'addr', 'show', 'dev', 'eth0']);
    assert.match(out, new RegExp(`inet ${p.ip!.replace(/\./g, '\\.')}/32`), `${p.name}'s eth0 has ${p.ip}`);
  }
  const byIp = new Map(pods.map((p) => [p.ip!, p]));
  const settled = await waitFor(
    'ipamd to hold exactly the live pods',
    async () => {
      const a = await allocations(c);
      return a.length === pods.length && a.every((x) => byIp.get(x.ipv4)?.uid === x.pod?.uid) ? a : undefined;
    },
    180_000,
    1000,
  ).catch(async (e: Error) => {
    const a = await allocations(c).catch(() => []);
    throw new Error(
      `${e.message}\nallocations: ${a.map((x) => `${x.ipv4}:${x.pod?.name}`).join(' ')}\npods: ${pods.map((p) => `${p.ip}:${p.name}`).join(' ')}`,
    );
  });
  for (const a of settled) assert.equal(eniOf(c, a.ipv4), a.eniId, `EC2 has ${a.ipv4} on ${a.eniId}`);
}

/** PIDs of ipamd (the chart's container) in the cluster's node network namespace. */
export function ipamdPids(c: TestCluster): number[] {
  const want = `net:[${statSync(c.nodeNetns.path).ino}]`;
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readlinkSync(`/proc/${d}/ns/net`) !== want) continue;
      if (/dist\/ipamd\/main\.js/.test(readFileSync(`/proc/${d}/cmdline`, 'utf8'))) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** SIGKILLs ipamd's process (as `kill -9` would). @throws Error when no ipamd runs. */
export async function killIpamd(c: TestCluster): Promise<void> {
  const pids = await waitFor('a running ipamd', () => {
    const p = ipamdPids(c);
    return p.length ? p : undefined;
  });
  for (const p of pids) process.kill(p, 'SIGKILL');
}
