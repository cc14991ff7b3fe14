/**
 * The property test's safety audit (release-audit.ts) catches what it must and nothing
 * else: table-driven over hand-made call logs and hold intervals.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ApiCallRecord } from '../../sim/index.js';
import { auditReleases, inCidr, listParam, type Hold } from './release-audit.js';

const hold = (ip: string, from: number, to = Infinity, eniId = 'eni-a'): Hold => ({
  containerId: `c-${ip}`,
  ip,
  eniId,
  from,
  to,
});
/** `durationMs` null = still unanswered. */
const call = (
  action: string,
  params: Record<string, string>,
  at: number,
  durationMs: number | null = 10,
  ok = true,
): ApiCallRecord => ({
  action,
  params: { Action: action, ...params },
  at,
  ok,
  ...(durationMs !== null ? { durationMs } : {}),
});

test('auditReleases: overlaps of release calls with held IPs', () => {
  const cases: Array<{ name: string; holds: Hold[]; calls: ApiCallRecord[]; want: number }> = [
    {
      name: 'unassign of a held IP',
      holds: [hold('10.0.0.5', 100)],
      calls: [
        call('UnassignPrivateIpAddresses', { NetworkInterfaceId: 'eni-a', 'PrivateIpAddress.1': '10.0.0.5' }, 200),
      ],
      want: 1,
    },
    {
      name: 'unassign after the DEL was sent',
      holds: [hold('10.0.0.5', 100, 150)],
      calls: [call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.5' }, 151)],
      want: 0,
    },
    {
      name: 'unassign that ended before the ADD reply',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.5' }, 80, 19)],
      want: 0,
    },
    {
      name: 'unassign still in flight at the ADD reply',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.5' }, 80, 25)],
      want: 1,
    },
    {
      name: 'unanswered unassign counts as in flight forever',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.5' }, 50, null, false)],
      want: 1,
    },
    {
      name: 'a refused (throttled) unassign of a held IP still counts',
      holds: [hold('10.0.0.5', 100)],
      calls: [
        {
          ...call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.5' }, 200, 1, false),
          errorCode: 'RequestLimitExceeded',
        },
      ],
      want: 1,
    },
    {
      name: 'other IPs only',
      holds: [hold('10.0.0.5', 100)],
      calls: [
        call('UnassignPrivateIpAddresses', { 'PrivateIpAddress.1': '10.0.0.6', 'PrivateIpAddress.2': '10.0.0.7' }, 200),
      ],
      want: 0,
    },
    {
      name: 'prefix covering a held IP',
      holds: [hold('10.0.0.37', 100)],
      calls: [call('UnassignPrivateIpAddresses', { 'Ipv4Prefix.1': '10.0.0.32/28' }, 200)],
      want: 1,
    },
    {
      name: 'prefix next to a held IP',
      holds: [hold('10.0.0.48', 100)],
      calls: [call('UnassignPrivateIpAddresses', { 'Ipv4Prefix.1': '10.0.0.32/28' }, 200)],
      want: 0,
    },
    {
      name: 'delete of the ENI holding a held IP',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('DeleteNetworkInterface', { NetworkInterfaceId: 'eni-a' }, 200)],
      want: 1,
    },
    {
      name: 'detach of the attachment of that ENI',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('DetachNetworkInterface', { AttachmentId: 'eni-attach-1' }, 200)],
      want: 1,
    },
    {
      name: 'detach of another ENI',
      holds: [hold('10.0.0.5', 100)],
      calls: [call('DetachNetworkInterface', { AttachmentId: 'eni-attach-2' }, 200)],
      want: 0,
    },
    {
      name: 'assign is not a release',
      holds: [hold('10.0.0.5', 100)],
      calls: [
        call('AssignPrivateIpAddresses', { NetworkInterfaceId: 'eni-a', SecondaryPrivateIpAddressCount: '2' }, 200),
      ],
      want: 0,
    },
  ];
  const attachmentEni = new Map([
    ['eni-attach-1', 'eni-a'],
    ['eni-attach-2', 'eni-b'],
  ]);
  for (const c of cases)
    assert.equal(auditReleases({ holds: c.holds, calls: c.calls, attachmentEni }).length, c.want, c.name);
});

test('listParam and inCidr follow the Query API list encoding and IPv4 CIDR match', () => {
  assert.deepEqual(
    listParam({ 'PrivateIpAddress.1': 'a', 'PrivateIpAddress.2': 'b', 'PrivateIpAddress.4': 'x' }, 'PrivateIpAddress'),
    ['a', 'b'],
  );
  assert.deepEqual(listParam({ AttachmentId: 'x' }, 'AttachmentId'), ['x']);
  assert.equal(inCidr('10.0.0.47', '10.0.0.32/28'), true);
  assert.equal(inCidr('10.0.0.48', '10.0.0.32/28'), false);
  assert.equal(inCidr('bogus', '10.0.0.32/28'), false);
});
