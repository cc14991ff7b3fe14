/**
 * The ENIConfig source (ipamd/eniconfig/source.ts) against the test run's real
 * kube-apiserver (the chart's ENIConfig CRD, ipamd as the chart's ServiceAccount) with
 * @kubernetes/client-node: the selection follows the node's annotation/label and the
 * ENIConfig objects as they change (watched, no restart), and an API that stops
 * answering (a relay holding every connection) turns it `unknown` (never a fallback),
 * then it recovers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { EniConfigSource } from '../../ipamd/eniconfig/source.js';
import { loadKubeConfig } from '../../ipamd/kube/config.js';
import type { EniConfigSelection } from '../../ipamd/controller/eni-lifecycle/placement-types.js';
import { realKubeEnv } from '../helpers/real-kube-env.js';
import { uniqueName } from '../../kit/cluster/apiserver-objects.js';
import { waitFor } from '../../kit/wait.js';

const KEY = 'k8s.amazonaws.com/eniConfig';
const SUBNET_A = 'subnet-0aaaaaaaaaaaaaaa1';
const SUBNET_B = 'subnet-0bbbbbbbbbbbbbbb1';
const SG = 'sg-0aaaaaaaaaaaaaaa1';

test('the selection follows the node and the ENIConfigs as they change, and goes unknown when the API fails', async (t) => {
  // ENIConfigs are cluster-scoped and the server is shared: names of this test's own.
  const A = uniqueName('pods-a');
  const B = uniqueName('pods-b');
  const env = await realKubeEnv(t, { prefix: 'eniconfig', labels: { [KEY]: A } });
  const api = env.kube;
  const { relay, kubeconfig } = await env.viaRelay();

  const source = new EniConfigSource({
    kc: loadKubeConfig(kubeconfig).kc,
    nodeName: env.nodeName,
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
  assert.deepEqual(missing.state === 'missing' && [missing.name, missing.selectedBy], [A, `label ${KEY}=${A}`]);

  assert.equal((await api.upsertEniConfig(A, { subnet: SUBNET_A, securityGroups: [SG] })).status, 201);
  const ok = await sel((s) => s.state === 'ok', 'ok after the ENIConfig is created');
  assert.deepEqual(ok, {
    state: 'ok',
    name: A,
    selectedBy: `label ${KEY}=${A}`,
    subnetIds: [SUBNET_A],
    securityGroupIds: [SG],
  });

  // An edit (list form) and an annotation that wins over the label, both seen through the watches.
  assert.equal((await api.upsertEniConfig(B, { subnet: SUBNET_B, subnets: [SUBNET_A] })).status, 201);
  await api.setNodeMetadata(env.nodeName, { annotations: { [KEY]: B } });
  const b = await sel((s) => s.state === 'ok' && s.name === B, 'the annotation selects pods-b');
  assert.deepEqual(b.state === 'ok' && [b.selectedBy, b.subnetIds], [`annotation ${KEY}=${B}`, [SUBNET_B, SUBNET_A]]);

  await api.deleteEniConfig(B);
  await sel((s) => s.state === 'missing' && s.name === B, 'missing after the delete');

  // The API stops answering: unknown (no ENI may be created), then back once it answers again.
  relay.hold();
  const unknown = await sel((s) => s.state === 'unknown', 'unknown while the API fails');
  assert.match(unknown.state === 'unknown' ? unknown.reason : '', /cannot be read|node/);
  relay.resume();
  await sel((s) => s.state === 'missing' && s.name === B, 'readable again after the outage');
  assert.ok(changes.length >= 5, `every change was told (${changes.map((c) => c.state).join(', ')})`);
});
