/**
 * The pure parts of the VPC/subnet CIDR facts host networking is built from: the VPC
 * blocks from IMDS (startup/subnet-cidrs.ts), the subnet CIDR of each ENI joined by
 * subnet id, and the re-read step that applies a new block at once but a dropped block
 * only when two reads agree (network/host-network-sync.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ImdsEni } from '../../ipamd/cloud/imds.js';
import type { Ec2Eni } from '../../ipamd/cloud/ec2-port.js';
import { missingSubnetCidrs, subnetCidrsFromImds, vpcCidrsFromImds } from '../../ipamd/startup/subnet-cidrs.js';
import { vpcCidrStep } from '../../ipamd/controller/host-network-sync.js';

const imdsEni = (p: Partial<ImdsEni>): ImdsEni => ({
  mac: '0a:00:00:00:00:01',
  eniId: 'eni-1',
  deviceNumber: 0,
  subnetId: 'subnet-node',
  vpcId: 'vpc-1',
  subnetCidr: '10.0.0.0/24',
  vpcCidrs: ['10.0.0.0/16', '100.64.0.0/16'],
  securityGroupIds: [],
  localIpv4s: [],
  ipv4Prefixes: [],
  ...p,
});

test('VPC CIDRs: every block IMDS lists, deduplicated; the node subnet only when IMDS lists none', () => {
  const primary = imdsEni({});
  const other = imdsEni({ vpcCidrs: ['100.64.0.0/16', '100.65.0.0/16', 'garbage'] });
  assert.deepEqual(vpcCidrsFromImds([primary, other], primary), ['10.0.0.0/16', '100.64.0.0/16', '100.65.0.0/16']);
  const bare = imdsEni({ vpcCidrs: [] });
  assert.deepEqual(vpcCidrsFromImds([bare], bare), ['10.0.0.0/24']);
});

test('subnet CIDRs are joined by subnet id; an ENI in a subnet IMDS describes no ENI in is missing', () => {
  const cidrs = subnetCidrsFromImds([
    imdsEni({}),
    imdsEni({ subnetId: 'subnet-pods', subnetCidr: '100.64.0.0/19' }),
    imdsEni({ subnetId: 'subnet-bad', subnetCidr: '' }),
  ]);
  assert.deepEqual(
    [...cidrs],
    [
      ['subnet-node', '10.0.0.0/24'],
      ['subnet-pods', '100.64.0.0/19'],
    ],
  );
  const eni = (eniId: string, subnetId: string) => ({ eniId, subnetId }) as Ec2Eni;
  assert.deepEqual(
    missingSubnetCidrs([eni('a', 'subnet-pods'), eni('b', 'subnet-bad'), eni('c', 'subnet-new')], cidrs).map(
      (e) => e.eniId,
    ),
    ['b', 'c'],
  );
});

test('VPC CIDR re-read: a new block applies at once, a dropped block only when two reads agree, an empty read never', () => {
  const now = ['10.0.0.0/16', '100.64.0.0/16'];
  assert.deepEqual(vpcCidrStep(now, [...now].reverse(), undefined), {}, 'same set: nothing');
  assert.deepEqual(vpcCidrStep(now, [...now, '100.65.0.0/16'], undefined), {
    apply: [...now, '100.65.0.0/16'],
  });
  assert.deepEqual(vpcCidrStep(now, [], undefined), {}, 'empty read: nothing');
  const first = vpcCidrStep(now, ['10.0.0.0/16'], undefined);
  assert.deepEqual(first, { shrinkSeen: ['10.0.0.0/16'] }, 'a drop waits for a second read');
  assert.deepEqual(vpcCidrStep(now, [], first.shrinkSeen), { shrinkSeen: ['10.0.0.0/16'] });
  assert.deepEqual(vpcCidrStep(now, ['10.0.0.0/16'], first.shrinkSeen), { apply: ['10.0.0.0/16'] });
  assert.deepEqual(vpcCidrStep(now, now, first.shrinkSeen), {}, 'the block is back: the drop is forgotten');
  assert.deepEqual(
    vpcCidrStep(now, ['10.0.0.0/16', '100.66.0.0/16'], first.shrinkSeen),
    { shrinkSeen: ['10.0.0.0/16', '100.66.0.0/16'] },
    'a different shorter list starts over',
  );
});
