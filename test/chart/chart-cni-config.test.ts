/**
 * The chart's cniConfig (a custom conflist, aws-node's value names) with the real helm:
 * off by default; on, a ConfigMap mounted into ipamd and named by
 * ENI_IPAM_CNI_CONFLIST_FILE; not JSON, not a list or no single eni-ipam plugin: refused at
 * render time with one line naming the value (docs/design.md#chained-plugins).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderChart } from '../../kit/helm.js';
import { validateObject } from '../helpers/k8s-validate.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const ipamdOf = (objs: Obj[]): Obj =>
  objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec.containers.find((c: Obj) => c.name === 'ipamd');

const CONFLIST = JSON.stringify({
  cniVersion: '1.0.0',
  name: 'aws-cni',
  plugins: [{ type: 'eni-ipam' }, { type: 'portmap', capabilities: { portMappings: true }, snat: true }],
});

test('cniConfig off: no ConfigMap, no ENI_IPAM_CNI_CONFLIST_FILE', async () => {
  const objs = (await renderChart()) as Obj[];
  assert.equal(objs.filter((o) => o.kind === 'ConfigMap').length, 0);
  assert.ok(!ipamdOf(objs).env.some((e: Obj) => e.name === 'ENI_IPAM_CNI_CONFLIST_FILE'));
});

test('cniConfig on: the conflist in a ConfigMap, mounted and named by ENI_IPAM_CNI_CONFLIST_FILE', async () => {
  const objs = (await renderChart({ cniConfig: { enabled: true, fileContents: CONFLIST } })) as Obj[];
  const cm = objs.find((o) => o.kind === 'ConfigMap');
  assert.equal(cm?.metadata.name, 'eni-ipam-cni-config');
  assert.equal(cm.data['conflist.json'], CONFLIST, 'the contents verbatim');
  for (const o of objs) assert.deepEqual(await validateObject(o), [], `${o.kind}/${o.metadata?.name}`);
  const c = ipamdOf(objs);
  const env = c.env.find((e: Obj) => e.name === 'ENI_IPAM_CNI_CONFLIST_FILE');
  assert.equal(env?.value, '/etc/eni-ipam/cni/conflist.json');
  const mount = c.volumeMounts.find((m: Obj) => m.name === 'cni-config');
  assert.deepEqual(mount, { name: 'cni-config', mountPath: '/etc/eni-ipam/cni', readOnly: true });
  const vol = objs
    .find((o) => o.kind === 'DaemonSet')!
    .spec.template.spec.volumes.find((v: Obj) => v.name === 'cni-config');
  assert.deepEqual(vol.configMap, {
    name: 'eni-ipam-cni-config',
    items: [{ key: 'conflist.json', path: 'conflist.json' }],
  });
});

test('a bad cniConfig is refused at render time with one line naming the value', async () => {
  const bad = (fileContents: string) => renderChart({ cniConfig: { enabled: true, fileContents } });
  await assert.rejects(bad(''), /cniConfig\.fileContents is empty/);
  await assert.rejects(bad('{"plugins": ['), /cniConfig\.fileContents is not valid JSON: /);
  await assert.rejects(
    bad('{"cniVersion":"1.0.0"}'),
    /cniConfig\.fileContents is not a CNI network configuration list/,
  );
  await assert.rejects(
    bad('{"cniVersion":"1.0.0","plugins":[{"type":"portmap"}]}'),
    /cniConfig\.fileContents must name the eni-ipam plugin exactly once .* it names it 0 times/,
  );
  await assert.rejects(
    renderChart({ cniConfig: { enabled: true, fileContents: 42 } }),
    /\/cniConfig\/fileContents': got number, want string/,
  );
  await assert.rejects(
    renderChart({ env: { ENI_IPAM_CNI_CONFLIST_FILE: '/x' } }),
    /env\.ENI_IPAM_CNI_CONFLIST_FILE is set by the chart from cniConfig; set that instead/,
  );
});
