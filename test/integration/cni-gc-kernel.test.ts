/**
 * CNI GC against the node's real kernel: the runtime's `cni.dev/valid-attachments` is one
 * source's word, so an attachment the kernel still shows wired to a pod veth is kept
 * whatever the list says; an unreadable kernel refuses the whole GC; and with a kernel
 * view that shows no pod veth at all (its silence cannot count as a second source) the
 * release brake caps what one GC may release.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { createNamedNetns, run, type Netns } from '../../kit/netns.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { KernelSource } from '../../ipamd/restore/kernel-source.js';
import { gcNetwork } from '../../ipamd/service/gc.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;
let seq = 0;
const name = (kind: string) => `eni-gck-${kind}-${process.pid}-${seq++}`;

/** A datastore with `n` allocations on one ENI: containers c0..c(n-1) holding 10.0.1.10.. in order. */
function store(n: number): Datastore {
  const ds = new Datastore(30_000);
  const ips = Array.from({ length: n }, (_, i) => `10.0.1.${10 + i}`);
  ds.upsertEni({
    eniId: 'eni-1',
    mac: '02:00:00:00:00:01',
    deviceNumber: 1,
    subnetId: 's',
    subnetCidr: '10.0.1.0/24',
    primaryIp: '10.0.1.4',
    isPrimary: false,
    createdAtMs: T0,
    capacity: n,
  });
  ds.addIps('eni-1', ips);
  for (let i = 0; i < n; i++)
    ds.assign({ networkName: 'aws-cni', containerID: `c${i}`, ifName: 'eth0' }, undefined, T0);
  return ds;
}

function deps(ds: Datastore, kernel: KernelSource) {
  return {
    ds,
    persist: async () => undefined,
    released: () => undefined,
    log,
    now: () => T0 + 1,
    routeTableFor: () => 2,
    kernel,
  };
}

async function wirePod(node: Netns, pod: Netns, veth: string, ip: string): Promise<void> {
  const n = path.basename(node.path);
  await run('ip', [
    '-n',
    n,
    'link',
    'add',
    veth,
    'type',
    'veth',
    'peer',
    'name',
    'eth0',
    'netns',
    path.basename(pod.path),
  ]);
  await run('ip', ['-n', n, 'link', 'set', veth, 'up']);
  await run('ip', ['-n', n, 'route', 'replace', `${ip}/32`, 'dev', veth, 'scope', 'link']);
}

test('CNI GC keeps what the kernel shows wired, refuses on an unreadable kernel, and is braked without a second source', async (t) => {
  const made: Netns[] = [];
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'eni-gck-'));
  t.after(async () => {
    for (const n of made.reverse()) await n.remove().catch(() => undefined);
    await rm(tmp, { recursive: true, force: true });
  });
  const node = await createNamedNetns(name('node'));
  made.push(node);
  const pod = await createNamedNetns(name('pod'));
  made.push(pod);
  const ds = store(20);
  // c0's pod is alive (its veth and /32 route exist); the runtime's list omits it and c1..c3.
  await wirePod(node, pod, 'enigck0000001', '10.0.1.10');
  const valid = Array.from({ length: 16 }, (_, i) => ({ containerID: `c${i + 4}`, ifName: 'eth0' }));

  const kernel = new KernelSource({ netnsPath: node.path });
  const released = await gcNetwork(deps(ds, kernel), 'aws-cni', valid);
  assert.deepEqual(
    released.map((r) => r.allocation.containerID).sort(),
    ['c1', 'c2', 'c3'],
    'the kernel and the runtime agree on c1..c3; c0 is wired',
  );
  assert.ok(
    ds.allocations().some((a) => a.containerID === 'c0'),
    'the wired pod keeps its IP',
  );

  // An `ip` that fails: nothing is released, the GC is refused with the reason.
  const badIp = path.join(tmp, 'ip');
  await writeFile(badIp, '#!/bin/sh\necho "garbage" \nexit 0\n');
  await chmod(badIp, 0o755);
  const before = ds.allocations().length;
  await assert.rejects(
    gcNetwork(deps(ds, new KernelSource({ ipPath: badIp })), 'aws-cni', []),
    /GC refused: .*unreadable/,
  );
  assert.equal(ds.allocations().length, before, 'an unreadable kernel releases nothing');

  // A kernel view with no pod veth (an empty netns: maybe the wrong one): its silence is
  // not a second source, so a GC that would release 16 of 17 on the list's word is held.
  const empty = await createNamedNetns(name('empty'));
  made.push(empty);
  await assert.rejects(
    gcNetwork(deps(ds, new KernelSource({ netnsPath: empty.path })), 'aws-cni', []),
    /release brake/,
  );
  assert.equal(ds.allocations().length, before, 'the held GC released nothing');
  // Within the brake's limit (max(2, 10 %)) it goes through.
  const keepAllBut2 = ds
    .allocations()
    .slice(2)
    .map((a) => ({ containerID: a.containerID, ifName: a.ifName }));
  assert.equal(
    (await gcNetwork(deps(ds, new KernelSource({ netnsPath: empty.path })), 'aws-cni', keepAllBut2)).length,
    2,
  );
});
