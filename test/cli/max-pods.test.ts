/**
 * `eni-ipam max-pods` against AWS's published figures. Expected values are typed from
 * amazon-vpc-cni-k8s misc/eni-max-pods.txt (the file EKS AMIs ship), one per instance
 * type; our figures come from the formula over ipamd/cloud/instance-types.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maxPods } from '../../cli/max-pods.js';
import { CliError, EXIT } from '../../cli/errors.js';

/** instance type → max pods published in eni-max-pods.txt. */
const PUBLISHED: Record<string, number> = {
  't2.micro': 4,
  't2.medium': 17,
  't2.large': 35,
  'm4.large': 20,
  't3.nano': 4,
  't3.micro': 4,
  't3.small': 11,
  't3.medium': 17,
  't3.large': 35,
  't3.xlarge': 58,
  't3.2xlarge': 58,
  'm5.large': 29,
  'm5.xlarge': 58,
  'm5.2xlarge': 58,
  'm5.4xlarge': 234,
  'm5.8xlarge': 234,
  'c5.large': 29,
  'c5.xlarge': 58,
  'c5.2xlarge': 58,
  'c5.4xlarge': 234,
  'c5.9xlarge': 234,
  'r5.large': 29,
  'r5.xlarge': 58,
  'r5.2xlarge': 58,
  'm6i.large': 29,
};

test('max-pods matches the published figure for every instance type in the table (>= 20 types)', () => {
  assert.ok(Object.keys(PUBLISHED).length >= 20);
  const wrong = Object.entries(PUBLISHED)
    .filter(([t, n]) => maxPods({ instanceType: t }).maxPods !== n)
    .map(([t, n]) => `${t}: ours ${maxPods({ instanceType: t }).maxPods}, published ${n}`);
  assert.deepEqual(wrong, []);
});

test('prefix delegation multiplies slots by 16; custom networking drops one ENI; the cap applies last', () => {
  assert.equal(maxPods({ instanceType: 'm5.large', prefixDelegation: true }).maxPods, 3 * 9 * 16 + 2);
  assert.equal(maxPods({ instanceType: 'm5.large', prefixDelegation: true, cap: 110 }).maxPods, 110);
  assert.equal(maxPods({ instanceType: 'm5.large', customNetworking: true }).maxPods, 2 * 9 + 2);
  assert.equal(
    maxPods({ instanceType: 't3.medium', customNetworking: true, prefixDelegation: true }).maxPods,
    2 * 5 * 16 + 2,
  );
  assert.equal(maxPods({ instanceType: 't3.micro', cap: 110 }).maxPods, 4);
  assert.match(
    maxPods({ instanceType: 'm5.large', prefixDelegation: true, cap: 110 }).explain,
    /3 × \(10 − 1\) × 16 \+ 2 = 434, capped at 110/,
  );
});

test('an unknown instance type names itself and the closest known one (usage exit code)', () => {
  assert.throws(
    () => maxPods({ instanceType: 'm5.larg' }),
    (e: unknown) =>
      e instanceof CliError &&
      e.code === EXIT.usage &&
      /unknown instance type "m5\.larg": the closest known one is m5\.large/.test(e.message),
  );
  assert.throws(() => maxPods({ instanceType: 'c5.xlarg' }), /closest known one is c5\.xlarge/);
  assert.throws(() => maxPods({ instanceType: 'm5.large', cap: 0 }), /--max-pods-cap "0" is invalid/);
});
