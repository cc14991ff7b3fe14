/**
 * How the conformance runner starts the suite (kit/cluster/conformance-run.ts): the ginkgo
 * command line hack/ginkgo-e2e.sh would give, and the kubeconfig it rewrites for the node's
 * namespace (the cluster's kubeconfigs are flow-style YAML: kit/cluster/pki.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { load } from 'js-yaml';
import { ginkgoArgv, kubeconfigFor } from '../../kit/cluster/conformance-run.js';
import { kubeconfigYaml } from '../../kit/cluster/pki.js';

test("kubeconfigFor points every cluster at the given server and keeps the user's token", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-kcfg-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const from = path.join(dir, 'admin.kubeconfig');
  await writeFile(from, kubeconfigYaml('https://127.0.0.1:40123', '/pki/ca.crt', 'admin', 'tok-1'));
  await kubeconfigFor(from, path.join(dir, 'in-node'), 'https://127.0.0.1:6443');
  const cfg = load(await readFile(path.join(dir, 'in-node'), 'utf8')) as {
    clusters: Array<{ cluster: { server: string; 'certificate-authority': string } }>;
    users: Array<{ user: { token: string } }>;
  };
  assert.equal(cfg.clusters[0]!.cluster.server, 'https://127.0.0.1:6443');
  assert.equal(cfg.clusters[0]!.cluster['certificate-authority'], '/pki/ca.crt');
  assert.equal(cfg.users[0]!.user.token, 'tok-1');
  await writeFile(from, 'apiVersion: v1\nkind: Config\n');
  await assert.rejects(kubeconfigFor(from, path.join(dir, 'x'), 'https://h'), /names no cluster server/);
});

test('ginkgoArgv: ginkgo flags before the suite binary, the suite flags after --', () => {
  const argv = ginkgoArgv({
    e2eBin: '/c/e2e/bin',
    kubectl: '/c/k8s/bin/kubectl',
    netns: '/run/netns/n',
    kubeconfig: '/r/kubeconfig',
    reportDir: '/r',
    focus: 'F',
    skip: 'S',
    procs: 4,
    nodes: 3,
    timeoutMin: 150,
    logFile: '/r/e2e.log',
  });
  const sep = argv.indexOf('--');
  assert.equal(argv[0], '/c/e2e/bin/ginkgo');
  assert.equal(argv[sep - 1], '/c/e2e/bin/e2e.test');
  for (const f of ['--procs=4', '--focus=F', '--skip=S', '--timeout=150m']) assert.ok(argv.indexOf(f) < sep, f);
  for (const f of [
    '--kubeconfig=/r/kubeconfig',
    '--provider=skeleton',
    '--report-dir=/r',
    '--kubectl-path=/c/k8s/bin/kubectl',
  ])
    assert.ok(argv.indexOf(f) > sep, f);
});
