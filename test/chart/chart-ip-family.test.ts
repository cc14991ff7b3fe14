/**
 * The chart's `ipFamily` (ipv4 | ipv6 | dual): ipamd's ENABLE_IPv6/ENABLE_IPv4 (and
 * ENABLE_PREFIX_DELEGATION=true for the IPv6 modes), the init container's `--ipv6`
 * (disable_ipv6=0, forwarding=1, accept_ra=2), the refusals, rendered by the real helm,
 * each object valid. And node-init's IPv6 sysctls written where it is told.
 */
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { renderChart } from '../../kit/helm.js';
import { setNodeSysctls } from '../../ipamd/node-init-steps.js';
import { validateObject } from '../helpers/k8s-validate.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const daemonSet = (objs: Obj[]): Obj => objs.find((o) => o.kind === 'DaemonSet')!;
const envOf = (ds: Obj) =>
  new Map<string, string>(
    ds.spec.template.spec.containers.find((c: Obj) => c.name === 'ipamd').env.map((e: Obj) => [e.name, e.value]),
  );
const initArgs = (ds: Obj): string[] => ds.spec.template.spec.initContainers[0].args;

test('ipFamily sets ipamd variables and the init sysctls flag; every object validates', async () => {
  const cases = [
    { ipFamily: undefined, v6: 'false', v4: 'true', pd: undefined, flag: false },
    { ipFamily: 'ipv4', v6: 'false', v4: 'true', pd: undefined, flag: false },
    { ipFamily: 'ipv6', v6: 'true', v4: 'false', pd: 'true', flag: true },
    { ipFamily: 'dual', v6: 'true', v4: 'true', pd: 'true', flag: true },
  ];
  for (const c of cases) {
    const objs = await renderChart(c.ipFamily ? { ipFamily: c.ipFamily } : {});
    const ds = daemonSet(objs);
    assert.deepEqual(await validateObject(ds), [], `${c.ipFamily}: DaemonSet valid`);
    const env = envOf(ds);
    assert.equal(env.get('ENABLE_IPv6'), c.v6, `${c.ipFamily} ENABLE_IPv6`);
    assert.equal(env.get('ENABLE_IPv4'), c.v4, `${c.ipFamily} ENABLE_IPv4`);
    assert.equal(env.get('ENABLE_PREFIX_DELEGATION'), c.pd, `${c.ipFamily} ENABLE_PREFIX_DELEGATION`);
    assert.equal(initArgs(ds).includes('--ipv6'), c.flag, `${c.ipFamily} init --ipv6`);
    const chartSet = env.get('ENI_IPAM_CHART_ENV')!.split(',');
    assert.ok(chartSet.includes('ENABLE_IPv6') && chartSet.includes('ENABLE_IPv4'));
  }
  // A user's own ENABLE_PREFIX_DELEGATION=true is kept, once.
  const own = daemonSet(await renderChart({ ipFamily: 'ipv6', env: { ENABLE_PREFIX_DELEGATION: 'true' } }));
  const names = own.spec.template.spec.containers[0].env.map((e: Obj) => e.name);
  assert.equal(names.filter((n: string) => n === 'ENABLE_PREFIX_DELEGATION').length, 1);
});

test('ipFamily refusals: an unknown family, env disagreeing with it, prefix delegation off', async () => {
  await assert.rejects(renderChart({ ipFamily: 'ipv5' }), /ipFamily.*(must be one of|value must be one of)/s);
  await assert.rejects(
    renderChart({ env: { ENABLE_IPv6: 'true' } }),
    /env\.ENABLE_IPv6=true disagrees with ipFamily ipv4 \(which sets it to false\); set ipFamily instead/,
  );
  await assert.rejects(
    renderChart({ ipFamily: 'ipv6', env: { ENABLE_IPv4: true } }),
    /env\.ENABLE_IPv4=true disagrees with ipFamily ipv6 \(which sets it to false\)/,
  );
  // aws-node's values copied over agree with the family: kept, not doubled.
  const copied = daemonSet(
    await renderChart({
      ipFamily: 'ipv6',
      env: { ENABLE_IPv6: 'true', ENABLE_IPv4: 'false', ENABLE_PREFIX_DELEGATION: true },
    }),
  );
  const names = copied.spec.template.spec.containers[0].env.map((e: Obj) => e.name);
  for (const n of ['ENABLE_IPv6', 'ENABLE_IPv4', 'ENABLE_PREFIX_DELEGATION'])
    assert.equal(names.filter((x: string) => x === n).length, 1, n);
  await assert.rejects(
    renderChart({ ipFamily: 'ipv6', env: { ENABLE_PREFIX_DELEGATION: 'false' } }),
    /ipFamily ipv6 serves pods from a \/80 prefix and needs env\.ENABLE_PREFIX_DELEGATION true \(got false\)/,
  );
});

test('node-init --ipv6 writes disable_ipv6=0, forwarding=1 and accept_ra=2 on the primary interface', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'procsys-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const d of ['net/ipv4/conf/all', 'net/ipv4/conf/ens5', 'net/ipv6/conf/all', 'net/ipv6/conf/ens5'])
    await mkdir(path.join(dir, d), { recursive: true });
  const set = await setNodeSysctls('ens5', dir, true);
  assert.deepEqual(set.slice(3), [
    'net.ipv6.conf.all.disable_ipv6=0',
    'net.ipv6.conf.all.forwarding=1',
    'net.ipv6.conf.ens5.accept_ra=2',
  ]);
  assert.equal(await readFile(path.join(dir, 'net/ipv6/conf/ens5/accept_ra'), 'utf8'), '2\n');
  assert.equal((await setNodeSysctls('ens5', dir)).length, 3, 'IPv4 only without the flag');
});
