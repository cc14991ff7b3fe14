/** `eni-ipam plan` and the pure joins of `pods`/`enis`, on status documents shaped as ipamd serves them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { IpamdStatus } from '../../cli/ipamd-api.js';
import { planFromStatus } from '../../cli/plan.js';
import { eniRows, podRows, routeTable, statusDevices } from '../../cli/views.js';
import { redactedEnv } from '../../cli/bundle.js';
import type { PoolEniView, PoolTargets } from '../../ipamd/pool/index.js';

const eni = (eniId: string, deviceNumber: number, total: number, assigned: number, cooling = 0): PoolEniView => ({
  eniId,
  deviceNumber,
  isPrimary: deviceNumber === 0,
  createdAtMs: 0,
  capacity: 9,
  total,
  assigned,
  cooling,
});

function status(enis: PoolEniView[], targets: Partial<PoolTargets>, extra: Partial<IpamdStatus> = {}): IpamdStatus {
  return {
    instanceId: 'i-1',
    instanceType: 'm5.large',
    counts: { total: 0, assigned: 0, available: 0, cooling: 0 },
    pool: { total: 0, assigned: 0, available: 0, cooling: 0, short: 0, over: 0, mode: 'warm-eni' },
    targets: { warmEniTarget: 1, maxEni: 3, ...targets },
    enis,
    releasesFrozen: false,
    freezeReasons: [],
    waitingAdds: 0,
    lastPoolError: null,
    vpcCidrs: ['10.0.0.0/16'],
    limits: { instanceType: 'm5.large', instanceMaxEnis: 3, ipv4PerEni: 10 },
    ...extra,
  };
}

test('plan: WARM_IP_TARGET short on the primary ENI assigns there, naming the binding target', () => {
  const p = planFromStatus(status([eni('eni-a', 0, 3, 2)], { warmIpTarget: 4 }), 10 ** 12);
  assert.deepEqual(p.grow.assign, [{ eniId: 'eni-a', count: 3 }]);
  assert.match(p.binding, /^WARM_IP_TARGET=4: 1 available, 3 short$/);
  assert.match(p.actions[0]!, /assign 3 secondary IPs to eni-a/);
});

test('plan: MINIMUM_IP_TARGET binds when it asks for more', () => {
  const p = planFromStatus(status([eni('eni-a', 0, 2, 0)], { warmIpTarget: 1, minimumIpTarget: 8 }), 10 ** 12);
  assert.match(p.binding, /^MINIMUM_IP_TARGET=8: 2 in the pool, 6 short$/);
});

test('plan: a full node names the ENI limit that binds and creates nothing', () => {
  const full = [eni('eni-a', 0, 9, 9), eni('eni-b', 1, 9, 9), eni('eni-c', 2, 9, 9)];
  const p = planFromStatus(status(full, { warmIpTarget: 2 }, { waitingAdds: 1 }), 10 ** 12);
  assert.equal(p.grow.createEnis.length, 0);
  assert.ok(
    p.actions.some((a) =>
      /cannot place 3 more addresses: instance type m5\.large is at its ENI limit \(3 ENIs\)/.test(a),
    ),
    p.actions.join('\n'),
  );
  assert.ok(p.actions.some((a) => /1 ADDs are waiting/.test(a)));
  assert.match(p.limit, /3 of 3 ENIs \(instance type m5\.large allows 3\), 9 secondary IPs per ENI/);
});

test('plan: surplus while frozen says nothing is released', () => {
  const st = status(
    [eni('eni-a', 0, 9, 0), eni('eni-b', 1, 9, 0)],
    { warmIpTarget: 1 },
    { releasesFrozen: true, freezeReasons: ['cri: unreadable'] },
  );
  const p = planFromStatus(st, 10 ** 12);
  assert.ok(p.shrink.deleteEnis.length + p.shrink.unassign.length > 0);
  assert.ok(
    p.actions.some((a) => /releases are frozen \(cri: unreadable\): nothing is released/.test(a)),
    p.actions.join('\n'),
  );
});

test('pods/enis: device number and route table (main for device 0, d+1 otherwise)', () => {
  assert.equal(routeTable(0), 'main');
  assert.equal(routeTable(2), '3');
  const st = status([eni('eni-a', 0, 2, 1), eni('eni-b', 1, 2, 1)], {});
  const allocs = [
    {
      networkName: 'aws-cni',
      containerID: 'c1',
      ifName: 'eth0',
      ipv4: '10.0.0.5',
      eniId: 'eni-b',
      allocatedAt: 0,
      pod: { namespace: 'default', name: 'web', uid: 'u' },
    },
    {
      networkName: 'aws-cni',
      containerID: 'c2',
      ifName: 'eth0',
      ipv4: '10.0.0.4',
      eniId: 'eni-a',
      allocatedAt: 0,
      pod: { namespace: 'default', name: 'api', uid: 'u2' },
    },
  ];
  const rows = podRows(statusDevices(st), allocs);
  assert.deepEqual(
    rows.map((r) => [r.pod, r.ip, r.eniId, r.deviceNumber, r.routeTable]),
    [
      ['api', '10.0.0.4', 'eni-a', 0, 'main'],
      ['web', '10.0.0.5', 'eni-b', 1, '2'],
    ],
  );
  assert.deepEqual(
    eniRows(st, allocs).map((e) => e.pods),
    [['default/api 10.0.0.4'], ['default/web 10.0.0.5']],
  );
});

test('support bundle env: secrets by name are redacted, the rest kept', () => {
  const out = redactedEnv({
    AWS_SECRET_ACCESS_KEY: 's3cr3t',
    AWS_SESSION_TOKEN: 'tok',
    DB_PASSWORD: 'pw',
    MY_CREDENTIALS: 'c',
    api_key: 'k',
    WARM_IP_TARGET: '4',
  });
  assert.doesNotMatch(out, /s3cr3t|=tok|=pw|=c\n|=k\n/);
  assert.match(out, /WARM_IP_TARGET=4/);
  assert.match(out, /AWS_SECRET_ACCESS_KEY=<redacted>/);
});
