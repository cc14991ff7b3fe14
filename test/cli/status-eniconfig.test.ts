/** `eni-ipam status` shows the ENIConfig in use (custom networking), or why none is usable. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderStatus } from '../../cli/commands/status.js';
import type { IpamdStatus } from '../../cli/ipamd-api.js';

const base: IpamdStatus = {
  instanceId: 'i-1',
  instanceType: 'm5.large',
  counts: { total: 9, assigned: 1, available: 8, cooling: 0 },
  pool: { total: 9, assigned: 1, cooling: 0, available: 8, short: 0, over: 0, mode: 'warm-eni' },
  targets: { warmEniTarget: 1, maxEni: 3 },
  enis: [],
  releasesFrozen: false,
  freezeReasons: [],
  waitingAdds: 0,
  lastPoolError: null,
  vpcCidrs: ['10.0.0.0/16', '100.64.0.0/16'],
};
const plain = (s: string) => s.replace(/\u001b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex

test('status names the ENIConfig, what selected it, its subnets and security groups', () => {
  const out = plain(
    renderStatus(
      {
        ...base,
        eniConfig: {
          state: 'ok',
          name: 'us-west-2a',
          selectedBy: 'label topology.kubernetes.io/zone=us-west-2a',
          subnetIds: ['subnet-0a'],
          securityGroupIds: [],
        },
      },
      'SERVING',
    ),
  );
  assert.match(
    out,
    /^ENIConfig: us-west-2a \(label topology\.kubernetes\.io\/zone=us-west-2a\): subnets subnet-0a; security groups the primary ENI's$/m,
  );
});

test('status says when the ENIConfig is missing and that no ENI is created; nothing when custom networking is off', () => {
  const out = plain(
    renderStatus(
      {
        ...base,
        eniConfig: { state: 'missing', name: 'a', selectedBy: 'annotation k8s.amazonaws.com/eniConfig=a', reason: 'x' },
      },
      'SERVING',
    ),
  );
  assert.match(out, /^ENIConfig: MISSING "a" \(annotation k8s\.amazonaws\.com\/eniConfig=a\): x; no ENI is created$/m);
  assert.doesNotMatch(plain(renderStatus({ ...base, eniConfig: { state: 'off' } }, 'SERVING')), /ENIConfig/);
  assert.doesNotMatch(plain(renderStatus(base, 'SERVING')), /ENIConfig/);
});
