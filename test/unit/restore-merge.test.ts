import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeEvidence, type MergeInput } from '../../ipamd/restore/merge.js';
import type { Allocation } from '../../ipamd/datastore/types.js';

const alloc = (id: string, ip: string, allocatedAt = 0, uid?: string): Allocation => ({
  networkName: 'aws-cni',
  containerID: id,
  ifName: 'eth0',
  ipv4: ip,
  eniId: 'eni-1',
  allocatedAt,
  ...(uid ? { pod: { namespace: 'default', name: `pod-${id}`, uid } } : {}),
});
const sb = (id: string, ip?: string) => ({
  id,
  podName: `pod-${id}`,
  podNamespace: 'default',
  podUid: `uid-${id}`,
  ...(ip ? { ip } : {}),
});

function input(p: Partial<MergeInput>): MergeInput {
  const allocations = p.allocations ?? [];
  return {
    allocations,
    cri: { ok: true, items: [] },
    kube: { ok: 'absent' },
    kernel: { ok: true, podIps: new Set(), podVeths: 0 },
    now: 100_000,
    graceMs: 60_000,
    networkName: 'aws-cni',
    ifName: 'eth0',
    isOurIp: (ip) => ip.startsWith('10.0.'),
    holderOf: (ip) => allocations.find((a) => a.ipv4 === ip),
    ...p,
  };
}

test('an unreadable CRI means nothing is released, whatever the other sources say', () => {
  const r = mergeEvidence(
    input({
      allocations: [alloc('a', '10.0.0.5')],
      cri: { ok: false, reason: 'dial unix: no such file' },
      kube: { ok: true, items: [] },
    }),
  );
  assert.equal(r.canRelease, false);
  assert.deepEqual(r.release, []);
  assert.equal(r.live.length, 1);
});

test('an unreadable Kubernetes source (when configured) also freezes releases', () => {
  const r = mergeEvidence(input({ allocations: [alloc('a', '10.0.0.5')], kube: { ok: false, reason: 'timeout' } }));
  assert.equal(r.canRelease, false);
  assert.deepEqual(r.release, []);
});

test('every source read and none vouches: released only after the grace period', () => {
  const old = alloc('old', '10.0.0.5', 0);
  const fresh = alloc('fresh', '10.0.0.6', 90_000); // 10 s old: an ADD may still be in progress
  const r = mergeEvidence(input({ allocations: [old, fresh], kube: { ok: true, items: [] } }));
  assert.equal(r.canRelease, true);
  assert.deepEqual(
    r.release.map((a) => a.containerID),
    ['old'],
  );
  assert.deepEqual(
    r.live.map((a) => a.containerID),
    ['fresh'],
  );
});

test('any one source vouching keeps an allocation live: sandbox id, sandbox IP, pod IP or pod uid', () => {
  const allocations = [
    alloc('by-id', '10.0.0.1'),
    alloc('by-cri-ip', '10.0.0.2'),
    alloc('by-pod-ip', '10.0.0.3'),
    alloc('by-uid', '10.0.0.4', 0, 'u-4'),
    alloc('none', '10.0.0.9'),
  ];
  const r = mergeEvidence(
    input({
      allocations,
      cri: { ok: true, items: [sb('by-id'), sb('other', '10.0.0.2')] },
      kube: {
        ok: true,
        items: [
          { namespace: 'd', name: 'x', uid: 'u-x', podIP: '10.0.0.3', hostNetwork: false },
          { namespace: 'd', name: 'y', uid: 'u-4', hostNetwork: false },
          { namespace: 'd', name: 'h', uid: 'u-h', podIP: '10.0.0.9', hostNetwork: true },
        ],
      },
    }),
  );
  assert.deepEqual(r.live.map((a) => a.containerID).sort(), ['by-cri-ip', 'by-id', 'by-pod-ip', 'by-uid']);
  assert.deepEqual(
    r.release.map((a) => a.containerID),
    ['none'],
    'a host-network pod sharing the node IP vouches for nothing',
  );
});

test('sandboxes the datastore lacks are adopted when their IP is ours and free; conflicts and foreign IPs are not', () => {
  const held = alloc('holder', '10.0.0.7');
  const r = mergeEvidence(
    input({
      allocations: [held],
      cri: {
        ok: true,
        items: [
          sb('new', '10.0.0.8'),
          sb('clash', '10.0.0.7'),
          sb('elsewhere', '192.168.1.4'),
          sb('no-ip'),
          sb('holder', '10.0.0.7'),
        ],
      },
    }),
  );
  assert.deepEqual(
    r.adopt.map((a) => [a.containerID, a.ipv4, a.pod?.uid]),
    [['new', '10.0.0.8', 'uid-new']],
  );
  assert.deepEqual(
    r.conflicts.map((c) => [c.sandbox.id, c.holder.containerID]),
    [['clash', 'holder']],
  );
  assert.deepEqual(
    r.foreign.map((s) => s.id),
    ['elsewhere'],
  );
});

test('without a Kubernetes source configured, a clean CRI read alone allows releases', () => {
  const r = mergeEvidence(input({ allocations: [alloc('gone', '10.0.0.5')], kube: { ok: 'absent' } }));
  assert.equal(r.canRelease, true);
  assert.equal(r.release.length, 1);
});
