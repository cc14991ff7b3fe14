/**
 * The evidence reconciler's GC grace counts from when its reads began, not from when it
 * merges them (docs/design.md#13-evidence-before-trust). Found by the pool property test
 * with ENI_IPAM_FAST_RESTART=true: an ADD served while the runtime read was in flight,
 * then a 3 s event-loop stall (the EC2 SDK loading on the background confirm's first
 * call) before the merge; the allocation looked 3 s old, the read predated its sandbox,
 * and the pass released an IP a live pod held (its DEL then answered released=false).
 * A real Datastore and ReleaseGate; the sources are in-memory readers behind the
 * reconciler's own interfaces, with a clock the test moves.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { EvidenceReconciler } from '../../ipamd/restore/reconciler.js';
import type { SandboxEvidence } from '../../ipamd/restore/merge.js';

const log = pino({ level: 'silent' });
const T0 = 1_700_000_000_000;
const GRACE_MS = 1000;
const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });

/** A node with `held` pods the runtime lists, and a runtime read the test completes by hand. */
function setup(held: number) {
  let clock = T0;
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
    capacity: 14,
  });
  ds.addIps(
    'eni-1',
    Array.from({ length: 14 }, (_, i) => `10.0.0.${10 + i}`),
  );
  const sandboxes: SandboxEvidence[] = [];
  const addPod = (id: string): string => {
    const r = ds.assign(key(id), undefined, clock);
    assert.equal(r.kind, 'assigned');
    const ip = r.kind === 'assigned' ? r.allocation.ipv4 : '';
    sandboxes.push({ id, podName: `pod-${id}`, podNamespace: 'default', podUid: `uid-${id}`, ip });
    return ip;
  };
  for (let i = 0; i < held; i++) addPod(`old-${i}`);
  clock += 10_000;
  /** The next runtime read: answered with the sandboxes as they were when it was asked, once the test says so. */
  let answer: (() => void) | undefined;
  const r = new EvidenceReconciler({
    ds,
    gate: new ReleaseGate(),
    log,
    persist: async () => undefined,
    intervalMs: 60_000,
    graceMs: GRACE_MS,
    networkName: 'aws-cni',
    now: () => clock,
    criEndpoint: 'unix:///run/containerd/containerd.sock',
    cri: {
      listReadySandboxes: () => {
        const snapshot = sandboxes.map((s) => ({ ...s }));
        return new Promise((resolve) => (answer = () => resolve(snapshot)));
      },
      runtimeIdentity: async () => ({ name: 'containerd', version: '1.7.2' }),
    },
    kernel: { readKernel: async () => ({ pods: new Map(), podVeths: 0, rulesOnly: [] }) },
  });
  const waitForRead = async () => {
    for (let i = 0; i < 100 && !answer; i++) await new Promise((res) => setImmediate(res));
    assert.ok(answer, 'the pass did not ask the runtime');
    const a = answer;
    answer = undefined;
    return a;
  };
  return {
    ds,
    r,
    addPod,
    waitForRead,
    advance: (ms: number) => (clock += ms),
    removePod: (id: string) =>
      sandboxes.splice(
        sandboxes.findIndex((s) => s.id === id),
        1,
      ),
  };
}

test('an ADD served while the runtime read is in flight is not released, however long the pass then stalls', async () => {
  const n = setup(3);
  const pass = n.r.runPass();
  const answer = await n.waitForRead(); // the runtime answered with the 3 old sandboxes
  const ip = n.addPod('new'); // ADD served meanwhile (its sandbox is listed from now on)
  n.advance(3 * GRACE_MS); // the event loop stalls 3 s before the merge runs
  answer();
  const p = await pass;
  assert.equal(p.released, 0, 'the pass released an allocation made after its runtime read');
  assert.equal(n.ds.allocations().find((a) => a.containerID === 'new')?.ipv4, ip);
  assert.equal(n.ds.allocations().length, 4);
  // The next pass reads the runtime afresh: it lists the new sandbox, nothing to release.
  const q = n.r.runPass();
  (await n.waitForRead())();
  assert.equal((await q).released, 0);
  assert.equal(n.ds.allocations().length, 4);
});

test('an allocation older than the grace when the reads began, that no source lists, is still released', async () => {
  const n = setup(3);
  n.removePod('old-1'); // its DEL was lost; the runtime no longer lists it
  const pass = n.r.runPass();
  n.advance(3 * GRACE_MS);
  (await n.waitForRead())();
  const p = await pass;
  assert.equal(p.released, 1);
  assert.deepEqual(
    n.ds
      .allocations()
      .map((a) => a.containerID)
      .sort(),
    ['old-0', 'old-2'],
  );
});

test('a DEL served while the runtime read is in flight stays remembered (its sandbox is never adopted)', async () => {
  const n = setup(3);
  n.removePod('old-2'); // the sandbox is already gone from the runtime's answer below
  const pass = n.r.runPass();
  const answer = await n.waitForRead();
  n.advance(10);
  assert.ok(n.ds.unassign(key('old-2'), T0 + 10_010)); // DEL served during the read
  n.advance(3 * GRACE_MS);
  answer();
  await pass;
  assert.equal(n.ds.wasUnassigned('old-2'), true, 'the DEL served after the read began was forgotten');
});
