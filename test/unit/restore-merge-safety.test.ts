/**
 * The merge rules of docs/design.md#13-evidence-before-trust items 1–3, table-driven: the kernel vouches, suspect
 * runtime/Kubernetes reads, identity mismatches, the release brake and its thresholds,
 * two-source agreement, and no false freeze when every source is right and a DEL was lost.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  mergeEvidence,
  type KernelRead,
  type MergeInput,
  type PodEvidence,
  type SandboxEvidence,
} from '../../ipamd/restore/merge.js';
import { brakeLimit } from '../../ipamd/restore/release-brake.js';
import { SANDBOX_LISTED_WITHIN_MS } from '../../ipamd/restore/plausibility.js';
import type { Allocation } from '../../ipamd/datastore/types.js';

const NOW = 1_000_000;
const GRACE = 60_000;
const ip = (n: number) => `10.0.0.${n}`;
const alloc = (n: number, allocatedAt = 0): Allocation => ({
  networkName: 'aws-cni',
  containerID: `c${n}`,
  ifName: 'eth0',
  ipv4: ip(n),
  eniId: 'eni-1',
  allocatedAt,
  pod: { namespace: 'default', name: `pod-${n}`, uid: `uid-${n}` },
});
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const sandbox = (n: number): SandboxEvidence => ({
  id: `c${n}`,
  podName: `pod-${n}`,
  podNamespace: 'default',
  podUid: `uid-${n}`,
  ip: ip(n),
});
const pod = (n: number): PodEvidence => ({
  namespace: 'default',
  name: `pod-${n}`,
  uid: `uid-${n}`,
  podIP: ip(n),
  hostNetwork: false,
});
const kernel = (wired: number[], podVeths = wired.length): KernelRead => ({
  ok: true,
  podIps: new Set(wired.map(ip)),
  podVeths,
});

function input(p: Partial<MergeInput>): MergeInput {
  const allocations = p.allocations ?? [];
  return {
    allocations,
    cri: { ok: true, items: [] },
    kube: { ok: 'absent' },
    kernel: kernel([]),
    now: NOW,
    graceMs: GRACE,
    networkName: 'aws-cni',
    ifName: 'eth0',
    isOurIp: (x) => x.startsWith('10.0.0.'),
    criEndpoint: 'unix:///run/containerd/containerd.sock',
    holderOf: (x) => allocations.find((a) => a.ipv4 === x),
    ...p,
  };
}
const ids = (as: Allocation[]) => as.map((a) => a.containerID).sort();

test('the kernel vouches: a wired allocation is never released, whatever the runtime and Kubernetes say', () => {
  const cases: Array<[string, Partial<MergeInput>]> = [
    ['runtime empty, no Kubernetes', {}],
    ['runtime and Kubernetes empty', { kube: { ok: true, items: [] } }],
    ['runtime lists other sandboxes', { cri: { ok: true, items: [sandbox(50), sandbox(51)] } }],
  ];
  for (const [name, over] of cases) {
    const r = mergeEvidence(input({ allocations: [alloc(1), alloc(2)], kernel: kernel([1]), ...over }));
    assert.ok(!ids(r.release).includes('c1'), `${name}: the wired allocation is not released`);
    assert.ok(ids(r.live).includes('c1'), name);
    assert.deepEqual(ids(r.kernelVouched), ['c1'], name);
  }
});

test('an unreadable kernel freezes every release, like any unreadable source', () => {
  const r = mergeEvidence(
    input({ allocations: [alloc(1)], kernel: { ok: false, reason: 'ip: not JSON' }, kube: { ok: true, items: [] } }),
  );
  assert.equal(r.canRelease, false);
  assert.deepEqual(r.release, []);
});

test('the seed outage: a reachable runtime that knows none of the wired pods is suspect and releases nothing', () => {
  const all = range(1, 12);
  const r = mergeEvidence(
    input({
      allocations: [...all.map((n) => alloc(n)), alloc(13)],
      kernel: kernel(all),
      criIdentity: { name: 'containerd', version: '1.6.20' },
    }),
  );
  assert.equal(r.canRelease, false);
  assert.deepEqual(r.release, [], 'not even the allocation the kernel does not show (c13)');
  assert.match(
    r.suspect.cri ?? '',
    /^runtime at unix:\/\/\/run\/containerd\/containerd.sock \(containerd 1\.6\.20\) answered with 0 sandboxes and knows 0 of the 12 pods the kernel shows wired; the checkpoint holds 13 from this boot and the kernel shows 12 pod veths$/,
  );
});

test('coverage thresholds: suspect below a quarter of at least 2 wired pods of any age; ADDs of the last seconds do not count', () => {
  // age: ms from the allocation to the reads (GRACE is 60 s).
  const rows: Array<{ wired: number; known: number; suspect: boolean; age?: number }> = [
    { wired: 12, known: 0, suspect: true },
    { wired: 12, known: 2, suspect: true },
    { wired: 12, known: 3, suspect: false },
    { wired: 2, known: 0, suspect: true },
    { wired: 1, known: 0, suspect: false }, // one pod is no basis (a stuck teardown); the kernel still protects it
    { wired: 12, known: 0, suspect: false, age: 1000 }, // ADDs just served: the runtime lists their sandbox seconds later
    { wired: 12, known: 0, suspect: false, age: SANDBOX_LISTED_WITHIN_MS - 1 },
    // Younger than the GC grace, but served long enough ago that a right runtime lists them: the
    // second, empty containerd that knew none of 22 young pods (issue 37) is suspect at once.
    { wired: 12, known: 0, suspect: true, age: SANDBOX_LISTED_WITHIN_MS },
    { wired: 22, known: 0, suspect: true, age: 30_000 },
    { wired: 22, known: 6, suspect: false, age: 30_000 },
  ];
  for (const row of rows) {
    const all = range(1, row.wired);
    const r = mergeEvidence(
      input({
        allocations: all.map((n) => alloc(n, row.age !== undefined ? NOW - row.age : 0)),
        kernel: kernel(all),
        cri: { ok: true, items: all.slice(0, row.known).map(sandbox) },
      }),
    );
    assert.equal(!!r.suspect.cri, row.suspect, JSON.stringify(row));
    assert.equal(r.canRelease, !row.suspect, JSON.stringify(row));
  }
});

test('Kubernetes is judged on pods older than the grace: a young pod whose IP the kubelet has not reported yet is no sign', () => {
  const all = range(1, 12);
  const r = mergeEvidence(
    input({
      allocations: all.map((n) => alloc(n, NOW - 30_000)),
      kernel: kernel(all),
      cri: { ok: true, items: all.map(sandbox) },
      // Bound to the node, no IP in their status yet, and no uid in the allocations (a runtime without K8S_POD_UID).
      kube: { ok: true, items: all.map((n) => ({ ...pod(n), podIP: undefined, uid: `other-${n}` })) },
    }),
  );
  assert.deepEqual(r.suspect, {});
  assert.equal(r.canRelease, true);
});

test('a suspect source still vouches for what it lists', () => {
  const all = range(1, 12);
  const r = mergeEvidence(
    input({
      allocations: [...all.map((n) => alloc(n)), alloc(20)],
      kernel: kernel(all),
      cri: { ok: true, items: [sandbox(20)] },
    }),
  );
  assert.ok(r.suspect.cri);
  assert.ok(ids(r.live).includes('c20'));
});

test('without a checkpoint: unverified IPs the kernel shows wired are never verified free; an empty runtime is suspect', () => {
  const wired = range(1, 12);
  const unverifiedIps = range(1, 20).map(ip);
  const wrong = mergeEvidence(input({ unverifiedIps, kernel: kernel(wired) }));
  assert.match(
    wrong.suspect.cri ?? '',
    /answered with 0 sandboxes .*there is no checkpoint and the kernel shows 12 pod veths/,
  );
  assert.equal(wrong.canRelease, false, 'nothing is verified free while the runtime is suspect');
  assert.deepEqual(wrong.keepUnverified.sort(), wired.map(ip).sort());

  const right = mergeEvidence(
    input({ unverifiedIps, kernel: kernel(wired), cri: { ok: true, items: range(1, 10).map(sandbox) } }),
  );
  assert.equal(right.canRelease, true);
  assert.deepEqual(right.adopt.map((a) => a.ipv4).sort(), range(1, 10).map(ip).sort());
  assert.deepEqual(
    right.keepUnverified.sort(),
    [ip(11), ip(12)],
    'wired but unlisted: kept unverified, not adopted, not free',
  );
});

test('runtime identity: differs from the node → suspect; from the checkpoint → suspect unless it knows every wired pod', () => {
  const all = range(1, 4);
  const base = {
    allocations: all.map((n) => alloc(n)),
    kernel: kernel(all),
    criIdentity: { name: 'containerd', version: '1.7.0' },
  };
  const knowsAll = { ok: true as const, items: all.map(sandbox) };
  const knowsHalf = { ok: true as const, items: all.slice(0, 2).map(sandbox) };
  const rows: Array<[string, Partial<MergeInput>, RegExp | undefined]> = [
    [
      'node reports another runtime',
      { cri: knowsAll, nodeRuntimeVersion: 'docker://20.10.24' },
      /is containerd 1\.7\.0 but the node reports docker:\/\/20\.10\.24/,
    ],
    [
      'node reports another version',
      { cri: knowsAll, nodeRuntimeVersion: 'containerd://1.6.20' },
      /but the node reports containerd:\/\/1\.6\.20/,
    ],
    [
      'node agrees',
      {
        cri: knowsHalf,
        nodeRuntimeVersion: 'containerd://1.7.0',
        recordedIdentity: { name: 'containerd', version: '1.6.20' },
      },
      undefined,
    ],
    [
      'checkpoint recorded another, runtime unproven',
      { cri: knowsHalf, recordedIdentity: { name: 'containerd', version: '1.6.20' } },
      /this boot's checkpoint recorded containerd 1\.6\.20/,
    ],
    [
      'checkpoint recorded another, runtime knows every wired pod (upgrade in place)',
      { cri: knowsAll, recordedIdentity: { name: 'containerd', version: '1.6.20' } },
      undefined,
    ],
    [
      'checkpoint recorded the same',
      { cri: knowsHalf, recordedIdentity: { name: 'containerd', version: '1.7.0' } },
      undefined,
    ],
  ];
  for (const [name, over, want] of rows) {
    const r = mergeEvidence(input({ ...base, ...over }));
    if (want) assert.match(r.suspect.cri ?? '', want, name);
    else assert.equal(r.suspect.cri, undefined, name);
    assert.equal(r.identityTrusted, !want, name);
  }
  const unknown = mergeEvidence(
    input({
      allocations: base.allocations,
      kernel: base.kernel,
      cri: knowsHalf,
      recordedIdentity: { name: 'containerd', version: '1.6.20' },
      nodeRuntimeVersion: 'docker://1',
    }),
  );
  assert.equal(
    unknown.suspect.cri,
    undefined,
    'a runtime that does not answer Version is judged on its sandboxes alone',
  );
  const idle = mergeEvidence(
    input({
      allocations: [alloc(1, NOW)],
      criIdentity: { name: 'containerd', version: '1.7.0' },
      recordedIdentity: { name: 'containerd', version: '1.6.20' },
    }),
  );
  assert.equal(
    idle.suspect.cri,
    undefined,
    'an upgraded runtime on a node with nothing at stake is not frozen forever',
  );
  assert.equal(idle.identityTrusted, true);
  const unwired = mergeEvidence(
    input({
      allocations: [alloc(1)],
      criIdentity: { name: 'containerd', version: '1.7.0' },
      recordedIdentity: { name: 'containerd', version: '1.6.20' },
    }),
  );
  assert.match(
    unwired.suspect.cri ?? '',
    /checkpoint recorded containerd 1\.6\.20/,
    'an old allocation the kernel cannot speak for is at stake',
  );
});

test('a wrong MY_NODE_NAME: Kubernetes lists no pods while the kernel shows them wired → suspect', () => {
  const all = range(1, 6);
  const r = mergeEvidence(
    input({
      allocations: [...all.map((n) => alloc(n)), alloc(9)],
      kernel: kernel(all),
      cri: { ok: true, items: all.map(sandbox) },
      kube: { ok: true, items: [] },
      nodeName: 'ip-10-0-0-1',
    }),
  );
  assert.match(
    r.suspect.kube ?? '',
    /Kubernetes lists 0 pods on node ip-10-0-0-1 and knows 0 of the 6 pods the kernel shows wired.*MY_NODE_NAME/,
  );
  assert.equal(r.suspect.cri, undefined);
  assert.equal(r.canRelease, false);
  assert.deepEqual(r.release, []);
});

test('brake limit is max(2, ⌊10 %⌋) of the allocations held', () => {
  for (const [held, limit] of [
    [0, 2],
    [1, 2],
    [10, 2],
    [29, 2],
    [30, 3],
    [100, 10],
    [250, 25],
  ] as const)
    assert.equal(brakeLimit(held), limit, `${held}`);
});

test('release brake: single-source releases above the limit release nothing; two sources agreeing lift the limit', () => {
  const live = range(1, 26);
  // The kernel shows no pod veth at all here (podVeths 0): its silence is not counted as a second source.
  const rows: Array<{
    name: string;
    leaked: number;
    kube?: boolean;
    kernelVeths?: number;
    released: number;
    held: boolean;
  }> = [
    { name: 'runtime alone, 3 of 29 leaked (limit 2)', leaked: 3, released: 0, held: true },
    { name: 'runtime alone, 2 of 28 leaked', leaked: 2, released: 2, held: false },
    { name: 'runtime and Kubernetes agree on 3', leaked: 3, kube: true, released: 3, held: false },
    {
      name: 'runtime and the kernel (showing pod veths) agree on 3',
      leaked: 3,
      kernelVeths: 26,
      released: 3,
      held: false,
    },
  ];
  for (const row of rows) {
    const gone = range(100, 100 + row.leaked - 1);
    const r = mergeEvidence(
      input({
        allocations: [...live, ...gone].map((n) => alloc(n)),
        cri: { ok: true, items: live.map(sandbox) },
        kernel: kernel([], row.kernelVeths ?? 0),
        ...(row.kube ? { kube: { ok: true, items: live.map(pod) } } : {}),
      }),
    );
    assert.equal(r.release.length, row.released, row.name);
    assert.equal(r.brake?.held, row.held, row.name);
    assert.equal(r.canRelease, !row.held, row.name);
    if (row.held)
      assert.match(
        r.brake?.reason ?? '',
        /release brake: this pass would release 3 of 29 allocations, 3 of them on the word of the runtime alone \(at most 2 allowed per pass/,
      );
  }
});

test('no false freeze: all sources right, one DEL lost → released in the first pass after the grace, not before', () => {
  const live = range(1, 20);
  const lost = 42;
  const sources = {
    cri: { ok: true as const, items: live.map(sandbox) },
    kube: { ok: true as const, items: live.map(pod) },
    kernel: kernel(live),
  };
  for (const [age, released] of [
    [GRACE - 1, false],
    [GRACE, true],
  ] as const) {
    const r = mergeEvidence(
      input({
        allocations: [...live.map((n) => alloc(n)), alloc(lost, NOW - age)],
        ...sources,
        criIdentity: { name: 'containerd', version: '1.6.20' },
        nodeRuntimeVersion: 'containerd://1.6.20',
      }),
    );
    assert.deepEqual(r.suspect, {});
    assert.equal(r.brake?.held, false);
    assert.equal(r.canRelease, true);
    assert.deepEqual(ids(r.release), released ? [`c${lost}`] : [], `age ${age} ms`);
  }
  // Without Kubernetes and with a single pod on the node the runtime alone still releases it.
  const alone = mergeEvidence(input({ allocations: [alloc(lost)] }));
  assert.deepEqual(ids(alone.release), [`c${lost}`]);
});
