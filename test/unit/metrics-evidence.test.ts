/**
 * The restore-safety metrics (docs/design.md#13-evidence-before-trust item 2/3): each evidence source's state at the
 * last pass (ok, unreadable, suspect) and whether the release brake held, from a pass report.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { createMetrics } from '../../ipamd/observability/metrics.js';
import type { PassReport } from '../../ipamd/restore/reconciler.js';
import { sourceStates } from '../../ipamd/restore/evidence.js';
import { parsePrometheusText, sample } from '../helpers/prom-text.js';

const report = (p: Partial<PassReport>): PassReport => ({
  criOk: true,
  kubeOk: 'absent',
  kernelOk: true,
  kernelPods: 0,
  kernelPodVeths: 0,
  runtime: 'containerd 1.6.20',
  adopted: 0,
  released: 0,
  conflicts: 0,
  live: 0,
  kernelVouched: 0,
  keptUnverified: 0,
  suspect: {},
  canRelease: true,
  ...p,
});

test('eni_ipam_evidence_source_state and eni_ipam_release_brake_held follow the last pass', async () => {
  let last: PassReport | undefined;
  const m = createMetrics({
    ds: new Datastore(1000),
    gate: new ReleaseGate(),
    evidence: () => (last ? sourceStates(last) : undefined),
  });
  let s = parsePrometheusText(await m.text());
  assert.equal(s.filter((x) => x.name === 'eni_ipam_evidence_source_state').length, 0, 'nothing before the first pass');
  assert.equal(sample(s, 'eni_ipam_release_brake_held'), 0);

  last = report({ kubeOk: true, suspect: { cri: 'runtime at x answered with 0 sandboxes' }, kernelOk: false });
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_evidence_source_state', { source: 'cri', state: 'suspect' }), 1);
  assert.equal(sample(s, 'eni_ipam_evidence_source_state', { source: 'kernel', state: 'unreadable' }), 1);
  assert.equal(sample(s, 'eni_ipam_evidence_source_state', { source: 'kube', state: 'ok' }), 1);
  assert.equal(s.filter((x) => x.name === 'eni_ipam_evidence_source_state').length, 3, 'one series per source');

  last = report({ brake: 'release brake: ...' });
  s = parsePrometheusText(await m.text());
  assert.equal(sample(s, 'eni_ipam_release_brake_held'), 1);
  assert.equal(sample(s, 'eni_ipam_evidence_source_state', { source: 'cri', state: 'ok' }), 1);
  assert.equal(
    s.filter((x) => x.name === 'eni_ipam_evidence_source_state').length,
    2,
    'no Kubernetes series when it is not configured',
  );
});
