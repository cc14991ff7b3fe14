/**
 * The evidence pass over IPv6 allocations (ipamd/restore/v6-evidence.ts, issue #31 item 2):
 * the reconciler over a real Datastore, Ipv6Allocations and ReleaseGate, with in-memory
 * sources behind its own interfaces. In `ipv6` mode a /128 no source vouches for is
 * released, one the runtime, Kubernetes or the kernel (its /128 or its egress /32) vouches
 * for is kept, and an unreadable or implausible source releases nothing; in `dual` mode
 * the two halves of one key are released together or not at all. After a lost IPv6
 * checkpoint the wired addresses quarantined "owner unknown" freeze a runtime that knows
 * none of them, and become the allocations of the sandboxes a trusted runtime shows.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { Ipv6Allocations, type V6Allocation } from '../../ipamd/datastore/ipv6-allocations.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { EvidenceReconciler, type PodCache, type ReconcilerOptions } from '../../ipamd/restore/reconciler.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';
import type { SandboxEvidence } from '../../ipamd/restore/merge.js';
import { egressVethNames, hostVethName } from '../../cni-plugin/facade.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;
const PREFIX = '2600:1f14:abc:de00:7::/80';
const IPS = Array.from({ length: 14 }, (_, i) => `10.0.0.${10 + i}`);
const key = (i: number) => ({ networkName: 'aws-cni', containerID: `c${i}`, ifName: 'eth0' });

interface World {
  sandboxes: SandboxEvidence[];
  /** Addresses (IPv4 or IPv6) the kernel shows wired to a pod veth. */
  wired: string[];
  /** The host veth each wired address routes to (default `eni<address>`). */
  devs?: Record<string, string>;
  /** Pod veths the kernel shows (default: one per wired address). */
  veths?: number;
  kernelFails?: string;
  criFails?: string;
}

/** `n` keys, each with an IPv6 half and, in `dual` mode, an IPv4 half; all older than the grace. */
function setup(mode: 'ipv6' | 'dual', n: number, kube?: PodCache) {
  const ds = new Datastore(30_000);
  ds.upsertEni({
    eniId: 'eni-1',
    mac: '02:00:00:00:00:01',
    deviceNumber: 1,
    subnetId: 's',
    subnetCidr: '10.0.0.0/24',
    primaryIp: '10.0.0.4',
    isPrimary: false,
    createdAtMs: T0,
    capacity: IPS.length,
  });
  ds.addIps('eni-1', IPS);
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: mode === 'ipv6', cooldownMs: 30_000 });
  const v4ips: string[] = [];
  const v6s: V6Allocation[] = [];
  for (let i = 0; i < n; i++) {
    if (mode === 'dual') {
      const r = ds.assign(key(i), undefined, T0);
      assert.equal(r.kind, 'assigned');
      v4ips.push(r.kind === 'assigned' ? r.allocation.ipv4 : '');
    }
    v6s.push(v6.assign(key(i), undefined, T0, T0).allocation);
  }
  const gate = new ReleaseGate();
  const w: World = { sandboxes: [], wired: [] };
  let v6Writes = 0;
  const kernelRead = async (): Promise<KernelEvidence> => {
    if (w.kernelFails) throw new Error(w.kernelFails);
    return {
      pods: new Map(w.wired.map((ip) => [ip, { ip, dev: w.devs?.[ip] ?? `eni${ip}`, rules: 0 }])),
      podVeths: w.veths ?? w.wired.length,
      rulesOnly: [],
    };
  };
  const o: ReconcilerOptions = {
    ds,
    gate,
    log,
    persist: async () => undefined,
    intervalMs: 60_000,
    graceMs: 1000,
    networkName: 'aws-cni',
    now: () => T0 + 10_000,
    criEndpoint: 'unix:///run/containerd/containerd.sock',
    cri: {
      listReadySandboxes: async () => {
        if (w.criFails) throw new Error(w.criFails);
        return w.sandboxes;
      },
      runtimeIdentity: async () => ({ name: 'containerd', version: '1.7.13' }),
    },
    kernel: { readKernel: kernelRead },
    v6: { v6, persist: async () => void v6Writes++, dual: mode === 'dual', vethPrefix: 'eni' },
  };
  if (kube) o.kube = kube;
  const r = new EvidenceReconciler(o);
  /** Sandbox of key `i`, its IP the pod's primary (IPv4 in `dual`, the /128 in `ipv6`). */
  const sb = (i: number): SandboxEvidence => ({
    id: `c${i}`,
    podName: `p${i}`,
    podNamespace: 'd',
    podUid: `u${i}`,
    ip: mode === 'dual' ? v4ips[i]! : v6s[i]!.ipv6,
  });
  const held6 = () => v6.allocations().map((a) => a.containerID);
  const held4 = () => ds.allocations().map((a) => a.containerID);
  return { ds, v6, gate, r, w, v4ips, v6s, sb, held6, held4, v6Writes: () => v6Writes };
}

test('ipv6 mode: the /128 whose sandbox is gone is released; the ones the runtime and kernel show are kept', async () => {
  const s = setup('ipv6', 4);
  s.w.sandboxes = [0, 1, 2].map(s.sb);
  s.w.wired = [0, 1, 2].map((i) => s.v6s[i]!.ipv6);
  const p = await s.r.runPass();
  assert.equal(p.canRelease, true);
  assert.equal(p.released, 1);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2']);
  assert.ok(s.v6Writes() >= 1, 'the release was made durable');
  // The released /128 cools: the next hand-out does not reuse it.
  const next = s.v6.assign(key(9), undefined, T0 + 10_000, T0 + 10_000).allocation;
  assert.notEqual(next.ipv6, s.v6s[3]!.ipv6);
});

test('ipv6 mode: the kernel alone keeps a /128 (its /128 route or its egress /32), whatever the runtime says', async () => {
  const s = setup('ipv6', 3);
  s.w.sandboxes = [s.sb(0)];
  // c1 wired by its /128 only, c2 by its egress IPv4 (v4if0) only; c0 by both.
  s.w.wired = [s.v6s[0]!.ipv6, s.v6s[1]!.ipv6, s.v6s[2]!.egressV4];
  const p = await s.r.runPass();
  assert.equal(p.released, 0);
  assert.equal(p.kernelVouched, 2);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2']);
});

test('ipv6 mode: an unreadable kernel or runtime releases nothing and freezes releases', async () => {
  const s = setup('ipv6', 3);
  s.w.kernelFails = 'ip: exited 1';
  let p = await s.r.runPass();
  assert.equal(p.canRelease, false);
  assert.equal(p.released, 0);
  assert.ok(s.gate.frozen);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2']);
  delete s.w.kernelFails;
  s.w.criFails = 'dial unix: connection refused';
  p = await s.r.runPass();
  assert.equal(p.released, 0);
  assert.ok(s.gate.frozen);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2']);
  // Readable again, every sandbox gone and the kernel shows pod veths but no /128: released.
  delete s.w.criFails;
  s.w.veths = 1;
  p = await s.r.runPass();
  assert.equal(p.canRelease, true);
  assert.deepEqual(s.held6(), []);
});

test('ipv6 mode: a runtime that knows none of the /128s the kernel shows wired is suspect: nothing released', async () => {
  const s = setup('ipv6', 12);
  s.w.sandboxes = []; // a wrong runtime: no sandbox at all
  s.w.wired = s.v6s.slice(0, 11).map((a) => a.ipv6); // eleven pods wired, one gone
  const p = await s.r.runPass();
  assert.ok(p.suspect.cri, 'the runtime is suspect');
  assert.equal(p.canRelease, false);
  assert.equal(p.released, 0);
  assert.equal(s.held6().length, 12);
  assert.ok(s.gate.frozen);
});

test('ipv6 mode: the release brake holds a single-source pass that would release most /128s', async () => {
  const s = setup('ipv6', 12);
  s.w.sandboxes = [s.sb(0)];
  s.w.wired = [];
  s.w.veths = 0; // a kernel view with no pod veth: its silence is not a second source
  const p = await s.r.runPass();
  assert.ok(p.brake, 'the brake held');
  assert.equal(p.released, 0);
  assert.equal(s.held6().length, 12);
});

test('dual mode: a key no source vouches for loses both halves; a key whose /128 alone is wired keeps both', async () => {
  const s = setup('dual', 4);
  s.w.sandboxes = [s.sb(0), s.sb(1)];
  s.w.wired = [0, 1].flatMap((i) => [s.v4ips[i]!, s.v6s[i]!.ipv6]).concat([s.v6s[2]!.ipv6]);
  const p = await s.r.runPass();
  assert.equal(p.canRelease, true);
  assert.deepEqual(s.held4(), ['c0', 'c1', 'c2'], 'c2 is wired by its /128: its IPv4 half is kept too');
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2'], 'c3 is gone: its IPv6 half went with its IPv4 half');
});

test('dual mode: an unreadable Kubernetes source keeps both halves of every key', async () => {
  const s = setup('dual', 3, { snapshot: () => ({ synced: false, pods: [], lastError: 'apiserver timeout' }) });
  const p = await s.r.runPass();
  assert.equal(p.canRelease, false);
  assert.deepEqual(s.held4(), ['c0', 'c1', 'c2']);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2']);
});

test('ipv6 mode, IPv6 checkpoint lost: a runtime knowing none of the unowned wired /128s is suspect; the right one gets each pod its /128 and egress IPv4 back, and DEL frees them', async () => {
  const s = setup('ipv6', 0);
  const pods = [0, 1, 2].map((i) => ({
    id: `c${i}`,
    ipv6: `2600:1f14:abc:de00:7::${(0x100 + i).toString(16)}`,
    egress: `169.254.172.${100 + i}`,
  }));
  s.w.wired = pods.flatMap((p) => [p.ipv6, p.egress]);
  s.w.devs = Object.fromEntries(
    // Pod 1 was wired by an eni-ipam before the upstream names: its egress veth has the older name.
    pods.flatMap((p, i) => [
      [p.ipv6, hostVethName('eni', { containerId: p.id, ifName: 'eth0' })],
      [p.egress, egressVethNames('eni', p.id, 'eth0')[i === 1 ? 1 : 0]!],
    ]),
  );
  assert.equal(s.v6.adoptWired(s.w.wired).length, 6, 'the start-up adoption quarantines every wired address');
  // A wrong runtime (no sandbox): suspect, nothing claimed.
  let p = await s.r.runPass();
  assert.ok(p.suspect.cri?.includes('knows 0 of the 3 pods'), `suspect: ${JSON.stringify(p.suspect)}`);
  assert.equal(p.canRelease, false);
  assert.ok(s.gate.frozen);
  assert.deepEqual(s.held6(), []);
  assert.equal(s.v6.unowned().length, 6);
  // The right runtime: each sandbox's /128 (and the egress IPv4 on its egress veth) is its allocation again.
  s.w.sandboxes = pods.map((x) => ({
    id: x.id,
    podName: `p-${x.id}`,
    podNamespace: 'd',
    podUid: `u-${x.id}`,
    ip: x.ipv6,
  }));
  p = await s.r.runPass();
  assert.equal(p.adopted, 3);
  assert.equal(p.canRelease, true);
  assert.deepEqual(
    s.v6.allocations().map((a) => [a.containerID, a.ipv6, a.egressV4]),
    pods.map((x) => [x.id, x.ipv6, x.egress]),
  );
  assert.deepEqual(s.v6.unowned(), []);
  assert.ok(s.v6Writes() >= 1, 'the claims were made durable');
  // Its DEL frees both addresses (into cooldown), no quarantine left behind.
  assert.ok(s.v6.unassign(key(0), T0 + 20_000));
  assert.deepEqual(s.v6.quarantined(), []);
  assert.deepEqual(s.held6(), ['c1', 'c2']);
});

test('ipv6 mode: a sandbox on an unowned /128 is not claimed while the runtime is suspect', async () => {
  const s = setup('ipv6', 0);
  const wired = Array.from({ length: 8 }, (_, i) => `2600:1f14:abc:de00:7::${(0x200 + i).toString(16)}`);
  s.v6.adoptWired(wired);
  s.w.wired = wired;
  // The runtime lists one of eight wired pods: below a quarter, suspect; its one sandbox stays quarantined.
  s.w.sandboxes = [{ id: 'c0', podName: 'p0', podNamespace: 'd', podUid: 'u0', ip: wired[0]! }];
  const p = await s.r.runPass();
  assert.ok(p.suspect.cri);
  assert.deepEqual(s.held6(), []);
  assert.equal(s.v6.unowned().length, 8);
});

test('ipv6 mode: unowned addresses no pod is wired to any more are freed only when every source is read and trusted', async () => {
  const s = setup('ipv6', 0);
  const gone = ['2600:1f14:abc:de00:7::300', '169.254.172.200'];
  const wired = Array.from({ length: 4 }, (_, i) => `2600:1f14:abc:de00:7::${(0x310 + i).toString(16)}`);
  s.v6.adoptWired([...gone, ...wired]);
  s.w.wired = wired;
  // A runtime that cannot be read: nothing freed.
  s.w.criFails = 'dial unix: connection refused';
  await s.r.runPass();
  assert.equal(s.v6.unowned().length, 6);
  // A wrong runtime (suspect: it knows none of the four wired pods): nothing freed, nothing claimed.
  delete s.w.criFails;
  let p = await s.r.runPass();
  assert.ok(p.suspect.cri);
  assert.equal(s.v6.unowned().length, 6);
  // The right runtime: the wired ones are claimed, the two no pod is wired to are freed (not handed out while they cool).
  s.w.sandboxes = wired.map((ip, i) => ({ id: `c${i}`, podName: `p${i}`, podNamespace: 'd', podUid: `u${i}`, ip }));
  p = await s.r.runPass();
  assert.equal(p.canRelease, true);
  assert.deepEqual(s.held6(), ['c0', 'c1', 'c2', 'c3']);
  assert.deepEqual(s.v6.unowned(), []);
  assert.deepEqual(s.v6.quarantined(), []);
  assert.ok(
    s.v6.state(T0 + 10_000).cooling.some((c) => c.address === gone[0]),
    'the freed /128 cools',
  );
});

test('dual mode: unowned /128s are not judged (the runtime reports the sandboxes by IPv4): no suspicion, they stay quarantined', async () => {
  const s = setup('dual', 3);
  const unowned = Array.from({ length: 16 }, (_, i) => `2600:1f14:abc:de00:7::${(0x400 + i).toString(16)}`);
  s.v6.adoptWired(unowned);
  s.w.sandboxes = [0, 1, 2].map(s.sb);
  s.w.wired = [...[0, 1, 2].flatMap((i) => [s.v4ips[i]!, s.v6s[i]!.ipv6]), ...unowned];
  const p = await s.r.runPass();
  assert.equal(p.suspect.cri, undefined);
  assert.equal(p.canRelease, true);
  assert.equal(s.v6.unowned().length, 16);
});
