/**
 * The ENIConfig source (ipamd/eniconfig/source.ts) against the Kubernetes API stand-in
 * (sim/kube) over HTTP with @kubernetes/client-node: the selection follows the node's
 * annotation/label and the ENIConfig objects as they change (watched, no restart), and an
 * API that stops answering turns it `unknown` (never a fallback), then it recovers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { EniConfigSource } from '../../ipamd/eniconfig/source.js';
import { loadKubeConfig } from '../../ipamd/restore/kube-source-config.js';
import type { EniConfigSelection } from '../../ipamd/controller/eni-lifecycle/placement-types.js';
import { startKubeStandIn } from '../helpers/kube-standin-env.js';
import { waitFor } from '../../kit/wait.js';

const KEY = 'k8s.amazonaws.com/eniConfig';
const SUBNET_A = 'subnet-0aaaaaaaaaaaaaaa1';
const SUBNET_B = 'subnet-0bbbbbbbbbbbbbbb1';
const SG = 'sg-0aaaaaaaaaaaaaaa1';

test('the selection follows the node and the ENIConfigs as they change, and goes unknown when the API fails', async (t) => {
  const { api, kubeconfig } = await startKubeStandIn(t, 'eni-ipam-eniconfig-source-');
  api.upsertNode('node-1');
  api.setNodeMetadata('node-1', { labels: { [KEY]: 'pods-a' } });

  const source = new EniConfigSource({
    kc: loadKubeConfig(kubeconfig).kc,
    nodeName: 'node-1',
    keys: { labelDef: KEY, annotationDef: KEY },
    log: pino({ level: 'silent' }),
    retryMinMs: 100,
    retryMaxMs: 400,
    listTimeoutMs: 2000,
  });
  const changes: EniConfigSelection[] = [];
  source.onChange((s) => changes.push(s));
  assert.equal(source.current().state, 'unknown', 'not read yet: unknown');
  source.start();
  t.after(() => source.stop());
  const sel = (want: (s: EniConfigSelection) => boolean, what: string) =>
    waitFor(what, () => (want(source.current()) ? source.current() : undefined), 10_000);

  const missing = await sel((s) => s.state === 'missing', 'missing');
  assert.deepEqual(missing.state === 'missing' && [missing.name, missing.selectedBy], [
    'pods-a',
    `label ${KEY}=pods-a`,
  ]);

  api.upsertEniConfig('pods-a', { subnet: SUBNET_A, securityGroups: [SG] });
  const ok = await sel((s) => s.state === 'ok', 'ok after the ENIConfig is created');
  assert.deepEqual(ok, {
    state: 'ok',
    name: 'pods-a',
    selectedBy: `label ${KEY}=pods-a`,
    subnetIds: [SUBNET_A],
    securityGroupIds: [SG],
  });

  // An edit (list form) and an annotation that wins over the label, both seen through the watches.
  api.upsertEniConfig('pods-b', { subnet: SUBNET_B, subnets: [SUBNET_A] });
  api.setNodeMetadata('node-1', { annotations: { [KEY]: 'pods-b' } });
  const b = await sel((s) => s.state === 'ok' && s.name === 'pods-b', 'the annotation selects pods-b');
  assert.deepEqual(b.state === 'ok' && [b.selectedBy, b.subnetIds], [`annotation ${KEY}=pods-b`, [SUBNET_B, SUBNET_A]]);

  api.deleteEniConfig('pods-b');
  await sel((s) => s.state === 'missing' && s.name === 'pods-b', 'missing after the delete');

  // The API stops answering: unknown (no ENI may be created), then back once it answers again.
  api.setFailure('error500');
  const unknown = await sel((s) => s.state === 'unknown', 'unknown while the API fails');
  assert.match(unknown.state === 'unknown' ? unknown.reason : '', /cannot be read|node/);
  api.setFailure('none');
  await sel((s) => s.state === 'missing' && s.name === 'pods-b', 'readable again after the outage');
  assert.ok(changes.length >= 5, `every change was told (${changes.map((c) => c.state).join(', ')})`);
});
