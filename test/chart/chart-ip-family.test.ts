/**
 * The chart's ipFamily with the real helm: ipv4 by default (ENABLE_IPv6=false,
 * ENABLE_IPv4=true, init `--ip-family=ipv4`); ipv6 and dual set ipamd's variables and the
 * init container's family; a value outside ipv4|ipv6|dual, or ENABLE_IPv6/ENABLE_IPv4 in
 * `env`, is refused at render time naming the value (docs/design.md#ip-families).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderChart } from '../../kit/helm.js';
import { validateObject } from '../helpers/k8s-validate.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const podSpec = (objs: Obj[]): Obj => objs.find((o) => o.kind === 'DaemonSet')!.spec.template.spec;
const envValue = (objs: Obj[], name: string): string | undefined =>
  podSpec(objs)
    .containers.find((c: Obj) => c.name === 'ipamd')
    .env.find((e: Obj) => e.name === name)?.value;
const initArgs = (objs: Obj[]): string[] =>
  podSpec(objs).initContainers.find((c: Obj) => c.name === 'node-init').args;

for (const [family, v6, v4] of [
  [undefined, 'false', 'true'],
  ['ipv4', 'false', 'true'],
  ['ipv6', 'true', 'false'],
  ['dual', 'true', 'true'],
] as const) {
  test(`ipFamily ${family ?? '(default)'}: ENABLE_IPv6=${v6}, ENABLE_IPv4=${v4}, init --ip-family`, async () => {
    const objs = (await renderChart(family ? { ipFamily: family } : {})) as Obj[];
    assert.equal(envValue(objs, 'ENABLE_IPv6'), v6);
    assert.equal(envValue(objs, 'ENABLE_IPv4'), v4);
    assert.ok(initArgs(objs).includes(`--ip-family=${family ?? 'ipv4'}`), initArgs(objs).join(' '));
    assert.match(envValue(objs, 'ENI_IPAM_CHART_ENV') ?? '', /(^|,)ENABLE_IPv4,ENABLE_IPv6(,|$)/);
    for (const o of objs) assert.deepEqual(await validateObject(o), [], `${o.kind}/${o.metadata?.name}`);
  });
}

test('a bad ipFamily, or an ENABLE_IPv6/ENABLE_IPv4 in env that contradicts it, is refused naming both', async () => {
  await assert.rejects(renderChart({ ipFamily: 'ipv5' }), /\/ipFamily': value must be one of 'ipv4', 'ipv6', 'dual'/);
  await assert.rejects(
    renderChart({ ipFamily: 'ipv6', env: { ENABLE_IPv6: 'false' } }),
    /env\.ENABLE_IPv6=false contradicts ipFamily=ipv6 \(which sets ENABLE_IPv6=true\); set ipFamily instead/,
  );
  await assert.rejects(
    renderChart({ ipFamily: 'ipv6', env: { ENABLE_IPv4: true } }),
    /env\.ENABLE_IPv4=true contradicts ipFamily=ipv6 \(which sets ENABLE_IPv4=false\)/,
  );
  // An aws-node user's copies that agree render, once each (the chart's entries).
  const objs = (await renderChart({ env: { ENABLE_IPv6: 'false', ENABLE_IPv4: 'TRUE' } })) as Obj[];
  const env = podSpec(objs).containers.find((c: Obj) => c.name === 'ipamd').env as Obj[];
  assert.deepEqual(
    env.filter((e) => /^ENABLE_IPv[46]$/.test(e.name)).map((e) => `${e.name}=${e.value}`),
    ['ENABLE_IPv6=false', 'ENABLE_IPv4=true'],
  );
});
