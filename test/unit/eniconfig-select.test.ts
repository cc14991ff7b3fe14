/**
 * The ENIConfig selection (ipamd/eniconfig/select.ts): amazon-vpc-cni-k8s's precedence
 * (external label, annotation, label, `default`), a missing, invalid or unreadable
 * ENIConfig, our `spec.subnets` list form, and the refusal text the create path and the
 * ADD error carry.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  checkEniConfigSpec,
  selectEniConfig,
  selectionBlock,
  selectionRefusal,
  type NodeFacts,
} from '../../ipamd/eniconfig/select.js';

const KEYS = { labelDef: 'k8s.amazonaws.com/eniConfig', annotationDef: 'k8s.amazonaws.com/eniConfig' };
const ZONE_KEYS = { labelDef: 'topology.kubernetes.io/zone', annotationDef: 'k8s.amazonaws.com/eniConfig' };
const SUBNET_A = 'subnet-0a1b2c3d4e5f60001';
const SUBNET_B = 'subnet-0a1b2c3d4e5f60002';
const SG_1 = 'sg-0a1b2c3d4e5f60001';
const SG_2 = 'sg-0a1b2c3d4e5f60002';

const cfg = (spec: Record<string, unknown>) => ({
  apiVersion: 'crd.k8s.amazonaws.com/v1alpha1',
  kind: 'ENIConfig',
  spec,
});
const configs = (o: Record<string, unknown>) => ({ byName: new Map(Object.entries(o)) });
const node = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}): NodeFacts => ({
  labels,
  annotations,
});

test('precedence: external label, then the annotation, then the label, then "default"', () => {
  const all = configs({
    ext: cfg({ subnet: SUBNET_A }),
    ann: cfg({ subnet: SUBNET_A }),
    lab: cfg({ subnet: SUBNET_A }),
    default: cfg({ subnet: SUBNET_A }),
  });
  const full = node(
    { 'vpc.amazonaws.com/externalEniConfig': 'ext', 'k8s.amazonaws.com/eniConfig': 'lab' },
    { 'k8s.amazonaws.com/eniConfig': 'ann' },
  );
  const pick = (n: NodeFacts) => {
    const s = selectEniConfig(KEYS, n, all);
    assert.equal(s.state, 'ok');
    return s.state === 'ok' ? [s.name, s.selectedBy] : [];
  };
  assert.deepEqual(pick(full), ['ext', 'label vpc.amazonaws.com/externalEniConfig=ext']);
  assert.deepEqual(pick(node({ 'k8s.amazonaws.com/eniConfig': 'lab' }, { 'k8s.amazonaws.com/eniConfig': 'ann' })), [
    'ann',
    'annotation k8s.amazonaws.com/eniConfig=ann',
  ]);
  assert.deepEqual(pick(node({ 'k8s.amazonaws.com/eniConfig': 'lab' })), [
    'lab',
    'label k8s.amazonaws.com/eniConfig=lab',
  ]);
  const [name, by] = pick(node());
  assert.equal(name, 'default');
  assert.match(by!, /^default \(the node has no annotation k8s\.amazonaws\.com\/eniConfig and no label/);
});

test('ENI_CONFIG_LABEL_DEF=topology.kubernetes.io/zone selects one ENIConfig per zone', () => {
  const s = selectEniConfig(
    ZONE_KEYS,
    node({ 'topology.kubernetes.io/zone': 'us-west-2a', 'k8s.amazonaws.com/eniConfig': 'ignored' }),
    configs({ 'us-west-2a': cfg({ subnet: SUBNET_B, securityGroups: [SG_1, SG_2] }) }),
  );
  assert.deepEqual(s, {
    state: 'ok',
    name: 'us-west-2a',
    selectedBy: 'label topology.kubernetes.io/zone=us-west-2a',
    subnetIds: [SUBNET_B],
    securityGroupIds: [SG_1, SG_2],
  });
});

test('a missing ENIConfig names itself and what selected it; the refusal says no ENI is created', () => {
  const s = selectEniConfig(KEYS, node({}, { 'k8s.amazonaws.com/eniConfig': 'pods-a' }), configs({}));
  assert.equal(s.state, 'missing');
  const refusal = selectionRefusal(s)!;
  assert.match(refusal, /ENIConfig "pods-a" \(annotation k8s\.amazonaws\.com\/eniConfig=pods-a\) is missing/);
  assert.match(refusal, /no ENI is created/);
  assert.deepEqual(selectionBlock(s)?.kind, 'eniconfig_missing');
  const empty = selectEniConfig(KEYS, node({ 'k8s.amazonaws.com/eniConfig': '' }), configs({}));
  assert.equal(empty.state, 'missing', 'an empty label value selects nothing');
});

test('invalid ENIConfigs: no subnet, malformed ids, wrong types', () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ metadata: {} }, /no spec/],
    [cfg({ securityGroups: [SG_1] }), /names no subnet/],
    [cfg({ subnet: 'subnet_1' }), /subnet id "subnet_1" is malformed/],
    [cfg({ subnet: SUBNET_A, securityGroups: ['default'] }), /security group id "default" is malformed/],
    [cfg({ subnet: SUBNET_A, securityGroups: SG_1 }), /spec\.securityGroups is not a list/],
    [cfg({ subnets: SUBNET_A }), /spec\.subnets is not a list/],
    [cfg({ subnet: 42 }), /spec\.subnet is not a string/],
  ];
  for (const [obj, why] of cases) {
    const s = selectEniConfig(KEYS, node(), configs({ default: obj }));
    assert.equal(s.state, 'invalid', JSON.stringify(obj));
    assert.match(s.state === 'invalid' ? s.reason : '', why);
    assert.match(s.state === 'invalid' ? s.reason : '', /ENIConfig "default" \(default/);
    assert.equal(selectionBlock(s)?.kind, 'eniconfig_invalid');
  }
});

test('list form: spec.subnet first, then spec.subnets, deduplicated; subnets alone is accepted', () => {
  assert.deepEqual(checkEniConfigSpec(cfg({ subnet: SUBNET_A, subnets: [SUBNET_B, SUBNET_A] })), {
    ok: true,
    subnetIds: [SUBNET_A, SUBNET_B],
    securityGroupIds: [],
  });
  assert.deepEqual(checkEniConfigSpec(cfg({ subnets: [SUBNET_B], securityGroups: [SG_1, SG_1] })), {
    ok: true,
    subnetIds: [SUBNET_B],
    securityGroupIds: [SG_1],
  });
  assert.equal(checkEniConfigSpec(cfg({ subnet: SUBNET_A, subnets: [SUBNET_B, 'nope'] })).ok, false);
});

test('unreadable node or ENIConfigs → unknown (never a fallback to the node subnet)', () => {
  const a = selectEniConfig(
    KEYS,
    { unreadable: 'connect ECONNREFUSED' },
    configs({ default: cfg({ subnet: SUBNET_A }) }),
  );
  assert.equal(a.state, 'unknown');
  assert.match(selectionRefusal(a)!, /not known yet: the node cannot be read: connect ECONNREFUSED/);
  const b = selectEniConfig(KEYS, node({ 'k8s.amazonaws.com/eniConfig': 'x' }), { unreadable: 'HTTP 403' });
  assert.deepEqual(
    { state: b.state, name: b.state === 'unknown' ? b.name : undefined },
    { state: 'unknown', name: 'x' },
  );
  assert.equal(selectionBlock(b)?.kind, 'eniconfig_unknown');
  assert.equal(selectionRefusal({ state: 'off' }), undefined);
});
