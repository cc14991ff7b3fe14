/**
 * The runtime identity rule against what a real kubelet writes: kubelet 1.36 reports
 * containerd 2.4.2's CRI version `v2.4.2` as `containerd://2.4.2` (seen on the real test
 * cluster), which ipamd first took for "kubelet uses another runtime" and froze releases.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kubeletRuntimeVersion, runtimeIdentityVerdict } from '../../ipamd/restore/plausibility.js';

test('the kubelet normal form of runtime versions', () => {
  assert.equal(kubeletRuntimeVersion('v2.4.2'), '2.4.2');
  assert.equal(kubeletRuntimeVersion('1.6.20~ds1'), '1.6.20');
  assert.equal(kubeletRuntimeVersion('1.7.0-rc.1+abc'), '1.7.0-rc.1+abc');
  assert.equal(kubeletRuntimeVersion('v1.30'), '1.30');
  assert.equal(kubeletRuntimeVersion('2.0.01'), '2.0.1');
  assert.equal(kubeletRuntimeVersion('unknown'), 'unknown');
});

test('containerd v2.4.2 over CRI and containerd://2.4.2 on the Node are the same runtime', () => {
  const cov = { base: 3, known: 3, suspect: false };
  const runtime = { name: 'containerd', version: 'v2.4.2' };
  const same = runtimeIdentityVerdict('unix:///run/containerd/containerd.sock', {
    runtime,
    nodeRuntimeVersion: 'containerd://2.4.2',
    cov,
    heldOld: 3,
  });
  assert.equal(same, undefined);
  const other = runtimeIdentityVerdict('unix:///run/containerd/containerd.sock', {
    runtime,
    nodeRuntimeVersion: 'cri-o://1.31.0',
    cov,
    heldOld: 3,
  });
  assert.match(other ?? '', /kubelet uses another runtime/);
});
