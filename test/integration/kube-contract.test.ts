/**
 * The contract between sim/kube and the real kube-apiserver: the Kubernetes calls ipamd
 * makes (kube-contract-calls.ts) run against both, and every answer compared. sim/kube
 * stays only where a real API server cannot serve (the demo's embedded default, the
 * fleet bench, failure injection); this test is what lets it: where it answers
 * differently from the real server, it fails.
 *
 * The real side is a private etcd + kube-apiserver (not the run's shared one): it starts
 * without the ENIConfig CRD and compacts its history.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStandIn } from '../../sim/kube/index.js';
import { compactEtcd, startApiServer } from '../../kit/cluster/apiserver.js';
import { adminKubectl, applyEniConfigCrd } from '../../kit/cluster/apiserver-setup.js';
import { realKube } from '../../kit/cluster/apiserver-objects.js';
import { kubeHttp } from '../../kit/cluster/kube-http.js';
import { runContract, type ContractBackend, type ContractRecord } from './kube-contract-calls.js';

async function standIn(t: { after(fn: () => Promise<void> | void): void }): Promise<ContractBackend> {
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-contract-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const s = new KubeApiStandIn({ eniConfigCrd: false });
  await s.start();
  t.after(() => s.stop());
  await s.writeKubeconfig(join(dir, 'kubeconfig'));
  return {
    name: 'sim/kube',
    api: kubeHttp(join(dir, 'kubeconfig')),
    registerNode: async (n) => s.upsertNode(n),
    upsertPod: async (p) => s.upsertPod(p),
    deletePod: async (ns, n) => s.deletePod(ns, n),
    upsertEniConfig: async (n, spec) => s.upsertEniConfig(n, spec),
    installEniConfigCrd: async () => s.setEniConfigCrd(true),
    compact: async () => s.compact(),
  };
}

async function real(t: { after(fn: () => Promise<void> | void): void }): Promise<ContractBackend> {
  const s = await startApiServer();
  t.after(() => s.close());
  const k = realKube(s);
  return {
    name: 'kube-apiserver',
    api: k.api,
    registerNode: (n) => k.registerNode(n),
    upsertPod: async (p) => void (await k.upsertPod(p)),
    deletePod: (ns, n) => k.deletePod(ns, n),
    upsertEniConfig: async (n, spec) => {
      const a = await k.upsertEniConfig(n, spec);
      assert.ok(a.status < 300, `ENIConfig ${n}: ${a.status}`);
    },
    installEniConfigCrd: async () => applyEniConfigCrd(await adminKubectl(s)),
    compact: async () => void (await compactEtcd(s)),
  };
}

test('sim/kube answers the calls ipamd makes as the real kube-apiserver does', async (t) => {
  const records: ContractRecord[] = [];
  for (const b of [await real(t), await standIn(t)]) records.push(await runContract(b, 'contract-node', 'contract'));
  const [want, got] = records as [ContractRecord, ContractRecord];
  t.diagnostic(`kube-apiserver: ${JSON.stringify(want, null, 1)}`);
  const diffs = Object.keys(want).filter((k) => JSON.stringify(want[k]) !== JSON.stringify(got[k]));
  for (const k of diffs)
    t.diagnostic(`${k}:\n  kube-apiserver ${JSON.stringify(want[k])}\n  sim/kube       ${JSON.stringify(got[k])}`);
  assert.deepEqual(diffs, [], 'every step answered the same');
});
