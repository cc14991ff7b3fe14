/**
 * Pure parts of the ENI lifecycle (docs/design.md#10-the-warm-pool-at-depth item 4): which ENIs the leaked-ENI sweep may
 * delete, how start-up sorts half-done ENIs, and which EC2 failures prove a request was
 * not executed. Table-driven.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ec2Error, type Ec2Eni } from '../../ipamd/cloud/ec2.js';
import { failedForSure, unassignRefusedKeepingAddresses } from '../../ipamd/cloud/ec2-outcome.js';
import { whyNotLeaked } from '../../ipamd/controller/eni-lifecycle/leak-sweep.js';
import { planAdoption } from '../../ipamd/startup/adopt.js';

const NOW = Date.parse('2026-01-01T12:00:00Z');
const ME = 'i-0me';

function eni(p: Partial<Ec2Eni> & { tags?: Record<string, string> } = {}): Ec2Eni {
  return {
    eniId: 'eni-1',
    mac: '0a:00:00:00:00:01',
    status: 'available',
    subnetId: 'subnet-1',
    vpcId: 'vpc-1',
    description: `aws-K8S-${ME}`,
    primaryIp: '10.0.0.10',
    secondaryIps: [],
    ipv4Prefixes: [],
    securityGroupIds: [],
    ...p,
    tags: {
      'node.k8s.amazonaws.com/instance_id': ME,
      'node.k8s.amazonaws.com/createdAt': '2026-01-01T11:50:00Z',
      ...p.tags,
    },
  };
}

test('whyNotLeaked: only ours, available, old enough, in scope, not busy', () => {
  const scope = { instanceId: ME, vpcId: 'vpc-1', now: NOW };
  const rows: Array<
    [
      string,
      Ec2Eni,
      Partial<typeof scope> & { clusterName?: string; isBusy?: (id: string) => boolean },
      RegExp | undefined,
    ]
  > = [
    ['ours, 10 min old', eni(), {}, undefined],
    ['in use', eni({ status: 'in-use' }), {}, /status/],
    [
      'attached but reported available',
      eni({
        attachment: {
          attachmentId: 'a',
          instanceId: ME,
          deviceIndex: 1,
          status: 'attached',
          deleteOnTermination: true,
        },
      }),
      {},
      /status/,
    ],
    ['untagged', eni({ tags: { 'node.k8s.amazonaws.com/instance_id': '' } }), {}, /not created/],
    ['foreign description', eni({ description: 'mine' }), {}, /not created/],
    ['no_manage', eni({ tags: { 'node.k8s.amazonaws.com/no_manage': 'true' } }), {}, /no_manage/],
    [
      'other instance, no cluster scope',
      eni({ tags: { 'node.k8s.amazonaws.com/instance_id': 'i-0other' } }),
      {},
      /scope/,
    ],
    [
      'other instance, same cluster',
      eni({ tags: { 'node.k8s.amazonaws.com/instance_id': 'i-0other', 'cluster.k8s.amazonaws.com/name': 'c1' } }),
      { clusterName: 'c1' },
      undefined,
    ],
    ['ours, other cluster', eni({ tags: { 'cluster.k8s.amazonaws.com/name': 'c2' } }), { clusterName: 'c1' }, /scope/],
    ['other VPC', eni({ vpcId: 'vpc-2' }), {}, /VPC/],
    ['4 min old', eni({ tags: { 'node.k8s.amazonaws.com/createdAt': '2026-01-01T11:56:00Z' } }), {}, /younger/],
    ['no createdAt', eni({ tags: { 'node.k8s.amazonaws.com/createdAt': 'yesterday' } }), {}, /createdAt/],
    ['busy', eni(), { isBusy: () => true }, /in use by this ipamd/],
  ];
  for (const [name, e, extra, want] of rows) {
    const got = whyNotLeaked(e, { ...scope, ...extra });
    if (want) assert.match(got ?? '', want, name);
    else assert.equal(got, undefined, name);
  }
});

test('planAdoption sorts half-done ENIs: load, pending, detaching, DeleteOnTermination fixes', () => {
  const att = (deviceIndex: number, status: string, deleteOnTermination = true) => ({
    attachment: { attachmentId: `att-${deviceIndex}`, instanceId: ME, deviceIndex, status, deleteOnTermination },
  });
  const primary = eni({
    eniId: 'eni-p',
    status: 'in-use',
    tags: { 'node.k8s.amazonaws.com/instance_id': '' },
    ...att(0, 'attached'),
  });
  const ok = eni({ eniId: 'eni-ok', status: 'in-use', ...att(1, 'attached') });
  const noDot = eni({ eniId: 'eni-nodot', status: 'in-use', ...att(2, 'attached', false) });
  const attaching = eni({ eniId: 'eni-attaching', status: 'attaching', ...att(3, 'attaching', false) });
  const notInImds = eni({ eniId: 'eni-lag', status: 'in-use', ...att(4, 'attached') });
  const detaching = eni({ eniId: 'eni-det', status: 'detaching', ...att(5, 'detaching') });
  const imdsEnis = ['eni-p', 'eni-ok', 'eni-nodot', 'eni-det'].map((eniId) => ({ eniId })) as never;
  const plan = planAdoption({
    managed: [primary, ok, noDot, attaching, notInImds, detaching],
    imdsEnis,
    instance: { instanceId: ME } as never,
  });
  assert.deepEqual(
    plan.load.map((e) => e.eniId),
    ['eni-p', 'eni-ok', 'eni-nodot'],
  );
  assert.deepEqual(
    plan.pending.map((e) => e.eniId),
    ['eni-attaching', 'eni-lag'],
  );
  assert.deepEqual(
    plan.detaching.map((e) => e.eniId),
    ['eni-det'],
  );
  assert.deepEqual(
    plan.fixDeleteOnTermination.map((e) => e.eniId),
    ['eni-nodot', 'eni-attaching'],
  );
});

test('failedForSure: 4xx and throttling prove nothing happened; 5xx, timeouts and unknowns do not', () => {
  const err = (code: string, status?: number, kind?: string) =>
    Object.assign(new Ec2Error('UnassignPrivateIpAddresses', code, 'x', status), kind ? { kind } : {});
  assert.equal(failedForSure(err('InvalidParameterValue', 400)), true);
  assert.equal(failedForSure(err('RequestLimitExceeded', 503, 'throttle')), true);
  assert.equal(failedForSure(err('RequestLimitExceeded', 503)), true);
  assert.equal(failedForSure(err('InternalError', 500)), false);
  assert.equal(failedForSure(err('InternalError', 500, 'server')), false);
  assert.equal(failedForSure(err('TimeoutError', undefined, 'transport')), false);
  assert.equal(failedForSure(new Error('socket hang up')), false);
  // Retried, then a 4xx: the first attempt (5xx/timeout) may have done it; the 4xx proves nothing.
  assert.equal(failedForSure(Object.assign(err('InvalidParameterValue', 400, 'client'), { attempts: 2 })), false);
  assert.equal(
    failedForSure(Object.assign(err('InvalidAttachmentID.NotFound', 400, 'client'), { attempts: 3 })),
    false,
  );
});

test('unassignRefusedKeepingAddresses: only a refusal that is not about the addresses proves they are all still there', () => {
  const err = (code: string, status?: number, kind?: string) =>
    Object.assign(new Ec2Error('UnassignPrivateIpAddresses', code, 'x', status), kind ? { kind } : {});
  assert.equal(unassignRefusedKeepingAddresses(err('RequestLimitExceeded', 503, 'throttle')), true);
  assert.equal(unassignRefusedKeepingAddresses(err('UnauthorizedOperation', 403, 'client')), true);
  assert.equal(
    unassignRefusedKeepingAddresses(err('InvalidParameterValue', 400, 'client')),
    false,
    'some are not assigned (any more)',
  );
  assert.equal(unassignRefusedKeepingAddresses(err('InternalError', 500, 'server')), false);
});
