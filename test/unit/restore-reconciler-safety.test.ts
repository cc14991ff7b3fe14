/**
 * The evidence reconciler over a real Datastore and ReleaseGate (docs/design.md#13-evidence-before-trust items 1–3):
 * the freeze reasons it sets for an unreadable kernel, a suspect runtime and a held
 * brake, that they lift when the sources are right again, that unverified IPs the kernel
 * shows wired stay unverified, and that the runtime identity is recorded once trusted.
 * The sources are in-memory readers behind the reconciler's own interfaces (the real
 * ones have their integration tests: kernel-source, cri-source, kube-source).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { EvidenceReconciler } from '../../ipamd/restore/reconciler.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';
import type { SandboxEvidence } from '../../ipamd/restore/merge.js';
import type { RuntimeIdentity } from '../../ipamd/restore/plausibility.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;
const IPS = Array.from({ length: 14 }, (_, i) => `10.0.0.${10 + i}`);

interface World {
  sandboxes: SandboxEvidence[];
  wired: string[];
  kernelFails?: string;
  identity?: RuntimeIdentity;
}

function setup(o: { allocate: number; unverified?: boolean; recorded?: RuntimeIdentity }) {
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
  const allocs = Array.from({ length: o.allocate }, (_, i) =>
    ds.assign({ networkName: 'aws-cni', containerID: `c${i}`, ifName: 'eth0' }, undefined, T0),
  );
  if (o.unverified) ds.markAllUnverified();
  const gate = new ReleaseGate();
  const w: World = { sandboxes: [], wired: [] };
  const recorded: RuntimeIdentity[] = [];
  const kernelRead = async (): Promise<KernelEvidence> => {
    if (w.kernelFails) throw new Error(w.kernelFails);
    return {
      pods: new Map(w.wired.map((ip) => [ip, { ip, dev: `eni${ip}`, rules: 2 }])),
      podVeths: w.wired.length,
      rulesOnly: [],
    };
  };
  const r = new EvidenceReconciler({
    ds,
    gate,
    log,
    persist: async () => undefined,
    intervalMs: 60_000,
    graceMs: 1000,
    networkName: 'aws-cni',
    now: () => T0 + 10_000,
    criEndpoint: 'unix:///run/containerd/containerd.sock',
    cri: { listReadySandboxes: async () => w.sandboxes, runtimeIdentity: async () => w.identity },
    kernel: { readKernel: kernelRead },
    ...(o.recorded ? { recordedIdentity: o.recorded } : {}),
    onTrustedIdentity: (id) => recorded.push(id),
  });
  const ips = allocs.map((a) => (a.kind === 'assigned' ? a.allocation.ipv4 : ''));
  const sb = (i: number): SandboxEvidence => ({
    id: `c${i}`,
    podName: `p${i}`,
    podNamespace: 'd',
    podUid: `u${i}`,
    ip: ips[i]!,
  });
  return { ds, gate, r, w, ips, sb, recorded };
}

test('a wrong runtime with every pod wired in the kernel: frozen with a reason naming it, nothing released; lifted when the right one answers', async () => {
  const { ds, gate, r, w, ips, sb } = setup({ allocate: 12 });
  assert.equal(ips.filter(Boolean).length, 12);
  w.wired = ips;
  w.identity = { name: 'containerd', version: '1.6.20' };
  const p = await r.runPass();
  assert.equal(p.released, 0);
  assert.equal(ds.allocations().length, 12);
  assert.deepEqual(gate.describe(), [
    'cri: suspect: runtime at unix:///run/containerd/containerd.sock (containerd 1.6.20) answered with 0 sandboxes and knows 0 of the 12 pods the kernel shows wired; the checkpoint holds 12 from this boot and the kernel shows 12 pod veths',
  ]);
  assert.equal(p.kernelVouched, 12);

  w.sandboxes = ips.slice(0, 11).map((_, i) => sb(i)); // the right runtime; c11's pod is gone (DEL lost)
  w.wired = ips.slice(0, 11);
  const q = await r.runPass();
  assert.equal(gate.frozen, false, gate.describe().join('; '));
  assert.equal(q.released, 1);
  assert.deepEqual(
    ds
      .allocations()
      .map((a) => a.containerID)
      .sort(),
    ips
      .slice(0, 11)
      .map((_, i) => `c${i}`)
      .sort(),
  );
});

test('an unreadable kernel freezes releases (source "kernel") and lifts once it reads', async () => {
  const { gate, r, w, ips, ds, sb } = setup({ allocate: 3 });
  w.kernelFails = "the kernel (ipamd's netns) unreadable: ip -json output line 1 is not JSON";
  const p = await r.runPass();
  assert.equal(p.released, 0);
  assert.deepEqual(gate.describe(), [
    "kernel: the kernel (ipamd's netns) unreadable: ip -json output line 1 is not JSON",
  ]);
  assert.equal(ds.allocations().length, 3);
  delete w.kernelFails;
  w.wired = ips.slice(0, 2);
  w.sandboxes = [sb(0), sb(1)];
  const q = await r.runPass();
  assert.equal(gate.frozen, false, gate.describe().join('; '));
  assert.deepEqual(
    ds
      .allocations()
      .map((a) => a.containerID)
      .sort(),
    ['c0', 'c1'],
    'then the leaked one goes',
  );
  assert.equal(q.released, 1);
});

test('the brake holds a single-source pass above max(2, 10 %), freezes with its reason, and lifts when a second source agrees', async () => {
  const { gate, r, w, ds } = setup({ allocate: 3 });
  w.wired = []; // no pod veth at all: the kernel's silence is not a second vote
  const p = await r.runPass();
  assert.equal(p.released, 0);
  assert.match(
    gate.describe().join(),
    /^brake: release brake: this pass would release 3 of 3 allocations, 3 of them on the word of the runtime alone \(at most 2 allowed per pass/,
  );
  assert.equal(ds.allocations().length, 3);
  w.wired = ['10.0.0.99']; // a pod veth elsewhere: the kernel shows pods, and none of ours → two sources agree
  const q = await r.runPass();
  assert.equal(q.released, 3);
  assert.equal(gate.frozen, false);
});

test('without a checkpoint: wired IPs stay unverified, the rest is verified free; the trusted identity is recorded once', async () => {
  const { ds, r, w, recorded } = setup({ allocate: 0, unverified: true });
  w.wired = ['10.0.0.10'];
  w.identity = { name: 'containerd', version: '1.7.2' };
  const p = await r.runPass();
  assert.equal(p.keptUnverified, 1);
  assert.equal(ds.ipState('10.0.0.10', T0 + 10_000), 'unverified');
  assert.equal(ds.ipState('10.0.0.11', T0 + 10_000), 'available');
  await r.runPass();
  assert.deepEqual(recorded, [{ name: 'containerd', version: '1.7.2' }]);
  assert.deepEqual(r.recordedIdentity, { name: 'containerd', version: '1.7.2' });
  w.wired = []; // the pod went away: its IP is verified free on the next pass
  await r.runPass();
  assert.equal(ds.ipState('10.0.0.10', T0 + 10_000), 'available');
});
