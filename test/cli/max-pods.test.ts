/**
 * `eni-ipam max-pods` over the generated instance table (cli/data/instance-limits.json)
 * against AWS's published figures. Expected values are typed from amazon-vpc-cni-k8s
 * misc/eni-max-pods.txt (the uncapped formula, which EKS AMIs ship) and from the EKS AMI's
 * max-pods-calculator (EKS's vCPU caps: 110 up to 30 vCPUs, 250 above).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CliError, EXIT } from '../../cli/errors.js';
import { instanceTable } from '../../cli/instance-limits.js';
import { eksCapFor, maxPods } from '../../cli/max-pods.js';
import { runCli } from '../helpers/cli-run.js';

/** instance type → max pods published in eni-max-pods.txt (no cap). */
const PUBLISHED: Record<string, number> = {
  't2.micro': 4,
  't3.medium': 17,
  'm4.large': 20,
  'm5.large': 29,
  'm5.4xlarge': 234,
  'c5.18xlarge': 737,
  'm5.metal': 737,
  'p5.48xlarge': 100,
  'm7g.medium': 8,
  'c7i.48xlarge': 737,
  'r6i.32xlarge': 737,
  't4g.nano': 4,
  'x2iedn.32xlarge': 737,
  'inf2.xlarge': 58,
};

test('the table covers current EC2 families (well over a thousand types, nearly all with vCPUs)', async () => {
  const t = await instanceTable();
  assert.ok(t.types.size > 1000, `${t.types.size} types`);
  const withCpu = [...t.types.values()].filter((i) => i.vcpus !== null).length;
  assert.ok(withCpu / t.types.size > 0.97, `${withCpu} of ${t.types.size} with vCPUs`);
  for (const f of ['m7i.large', 'c8g.large', 'r7a.large', 'g6.xlarge', 'm6i.large', 't3.micro'])
    assert.ok(t.types.has(f), `${f} missing`);
  assert.match(
    t.source,
    /aws\/amazon-vpc-cni-k8s@[0-9a-f]{12}.*aws\/karpenter-provider-aws.*generated \d{4}-\d\d-\d\d/,
  );
});

test('the uncapped formula matches eni-max-pods.txt', async () => {
  const t = await instanceTable();
  const wrong = Object.entries(PUBLISHED)
    .map(([type, n]) => [type, n, maxPods(t, { instanceType: type, eksCap: false }).maxPods] as const)
    .filter(([, n, ours]) => ours !== n);
  assert.deepEqual(wrong, []);
});

test("EKS's caps: m5.large 29 without prefix delegation, 110 with it; 250 above 30 vCPUs", async () => {
  const t = await instanceTable();
  assert.equal(maxPods(t, { instanceType: 'm5.large' }).maxPods, 29);
  const pd = maxPods(t, { instanceType: 'm5.large', prefixDelegation: true });
  assert.equal(pd.formula, 434);
  assert.equal(pd.maxPods, 110);
  assert.match(pd.explain, /3 × \(10 − 1\) × 16 \+ 2 = 434, EKS cap 110 \(2 vCPUs ≤ 30\)/);
  assert.equal(maxPods(t, { instanceType: 'm5.large', prefixDelegation: true, eksCap: false }).maxPods, 434);
  assert.equal(maxPods(t, { instanceType: 'm5.4xlarge' }).maxPods, 110, '16 vCPUs: 234 capped at 110');
  assert.equal(maxPods(t, { instanceType: 'm5.8xlarge' }).maxPods, 234, '32 vCPUs: 234 under the 250 cap');
  assert.equal(
    maxPods(t, { instanceType: 'm5.8xlarge', prefixDelegation: true }).maxPods,
    250,
    '32 vCPUs: capped at 250',
  );
  assert.equal(maxPods(t, { instanceType: 'c5.18xlarge' }).maxPods, 250, '72 vCPUs: 737 capped at 250');
  assert.deepEqual([eksCapFor(30), eksCapFor(31)], [110, 250]);
  assert.equal(maxPods(t, { instanceType: 'm5.large', customNetworking: true }).maxPods, 2 * 9 + 2);
  assert.equal(maxPods(t, { instanceType: 'm5.large', prefixDelegation: true, cap: 58 }).maxPods, 58);
  const xen = maxPods(t, { instanceType: 't2.medium', prefixDelegation: true });
  assert.equal(xen.perSlot, 1, 'no prefix delegation on a Xen type');
  assert.match(xen.explain, /no prefix delegation on a xen type/);
});

test('an unknown instance type says so and how to refresh the table; it never guesses', async () => {
  const t = await instanceTable();
  assert.throws(
    () => maxPods(t, { instanceType: 'm9z.large' }),
    (e: unknown) =>
      e instanceof CliError &&
      e.code === EXIT.usage &&
      /unknown instance type "m9z\.large": not among the \d+ types of the table/.test(e.message) &&
      /scripts\/refresh-instance-limits\.mjs/.test(e.message),
  );
  assert.throws(() => maxPods(t, { instanceType: 'c5.xlarg' }), /closest listed one is c5\.xlarge/);
  assert.throws(() => maxPods(t, { instanceType: 'm5.large', cap: 0 }), /--max-pods-cap "0" is invalid/);
  const noCpu = [...t.types.values()].find((i) => i.vcpus === null);
  if (noCpu) {
    assert.throws(() => maxPods(t, { instanceType: noCpu.instanceType }), /lists no vCPUs .* --no-eks-cap/);
    assert.ok(maxPods(t, { instanceType: noCpu.instanceType, eksCap: false }).maxPods > 0);
  }
});

test('the built CLI: max-pods prints, --output yaml parses, and an unknown type exits 2 with one line', async () => {
  const r = await runCli(['max-pods', '--instance-type', 'm5.large', '--prefix-delegation']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^m5\.large: max pods 110 \(/);
  const { default: yaml } = await import('yaml');
  const y = await runCli(['max-pods', '--instance-type', 'm5.large', '-o', 'yaml']);
  assert.equal(y.code, 0, y.stderr);
  assert.deepEqual(
    yaml.parse(y.stdout),
    JSON.parse((await runCli(['max-pods', '--instance-type', 'm5.large', '-o', 'json'])).stdout),
  );
  const u = await runCli(['max-pods', '--instance-type', 'q9.huge']);
  assert.equal(u.code, EXIT.usage);
  assert.equal(u.stderr.trimEnd().split('\n').length, 1);
  assert.match(u.stderr, /^eni-ipam: unknown instance type "q9\.huge".*refresh/);
});
