/**
 * One spec, three gates, through the real helm (docs/configuration.md): the same bad
 * values fed to `helm template` and to ipamd's config parser are refused by both, and
 * with the same reason (the setting's accepts phrase, or for ADDITIONAL_ENI_TAGS the very
 * words after "is invalid:"); good values are accepted by both and rendered as ipamd reads
 * them. The exhaustive agreement of the schema and the parser is test/unit/config-gates.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configSpecs, loadConfigReport } from '../../ipamd/config.js';
import { chartTypeOf } from '../../ipamd/config-chart-types.js';
import { renderChart } from '../../kit/helm.js';

type Obj = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const accepts = (name: string): string => chartTypeOf(configSpecs().find((s) => s.name === name)!.field)!.accepts;
const ipamdError = (env: Record<string, string>): string => {
  try {
    loadConfigReport(env);
  } catch (e) {
    return (e as Error).message;
  }
  return '';
};
const chartError = async (values: Obj): Promise<string> =>
  renderChart(values).then(
    () => '',
    (e: Error) => e.message.replace(/\\'/g, "'"), // helm writes a ' inside its quotes as \'
  );

/** name → bad value (as a chart value; ipamd gets its text). */
const BAD: Array<[string, unknown]> = [
  ['AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS', '10.0.0.0/33'],
  ['AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS', '10.0.0.0/8,300.1.1.1/8'],
  ['ENABLE_PREFIX_DELEGATION', 'yes'],
  ['ENABLE_IPv6', 'on'],
  ['WARM_ENI_TARGET', 'abc'],
  ['AWS_VPC_ENI_MTU', '10000'],
  ['AWS_VPC_ENI_MTU', 9002],
  ['ENI_IPAM_CNI_IPAMD_WAIT', '301s'],
  ['IP_COOLDOWN_PERIOD', '597h'],
  ['AWS_VPC_K8S_CNI_CONNMARK', '0x100000000'],
  ['AWS_VPC_K8S_CNI_VETHPREFIX', 'eth'],
  ['INTROSPECTION_BIND_ADDRESS', '127.0.0.1:65536'],
  ['AWS_EC2_ENDPOINT', 'http://1.2.3.999'],
  ['ENI_CONFIG_LABEL_DEF', 'Bad_Prefix/x'],
  ['ENI_IPAM_CHECKPOINT_PATH', '/proc/ipam.json'],
];

/** Good values: both accept; the DaemonSet carries the text ipamd reads. */
const GOOD: Array<[string, unknown, string]> = [
  ['ENABLE_PREFIX_DELEGATION', 't', 't'],
  ['ENABLE_SUBNET_DISCOVERY', 'False', 'False'],
  ['DISABLE_METRICS', false, 'false'],
  ['AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS', '10.0.0.0/8, 192.168.0.0/16', '10.0.0.0/8, 192.168.0.0/16'],
  ['AWS_VPC_K8S_CNI_CONNMARK', 4294967295, '4294967295'],
  ['ENI_IPAM_EC2_RATE', 0.5, '0.5'],
  ['IP_COOLDOWN_PERIOD', '596h', '596h'],
  ['ADDITIONAL_ENI_TAGS', '{"team":"net"}', '{"team":"net"}'],
];

test('a bad value is refused by the chart and by ipamd, for the same reason', async () => {
  for (const [name, value] of BAD) {
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    const why = accepts(name);
    const fromIpamd = ipamdError({ [name]: text });
    assert.ok(fromIpamd.startsWith(`${name}=`) && fromIpamd.includes(`expected ${why}`), `ipamd ${name}: ${fromIpamd}`);
    const fromEnv = await chartError({ env: { [name]: value } });
    assert.ok(fromEnv.includes(`at '/env/${name}': value must be '${why}'`), `chart env.${name}=${text}: ${fromEnv}`);
  }
  // extraEnv entries naming a known variable are held to the same check (and name it).
  for (const [name, value] of BAD.slice(0, 4)) {
    const err = await chartError({
      extraEnv: [
        { name: 'OTHER', value: 'x' },
        { name, value },
      ],
    });
    assert.ok(err.includes(`at '/extraEnv/1/value': value must be '${name}: ${accepts(name)}'`), err);
  }
});

test('ADDITIONAL_ENI_TAGS: the chart refuses what ipamd refuses, in the same words', async () => {
  const cases = [
    'notjson',
    '["a"]',
    '{"team":1}',
    '{"aws:created-by":"me"}',
    '{"Node.K8s.Amazonaws.com/instance_id":"i-1"}',
    `{"${'k'.repeat(129)}":"v"}`,
    `{"k":"${'v'.repeat(257)}"}`,
    JSON.stringify(Object.fromEntries(Array.from({ length: 48 }, (_, i) => [`k${i}`, 'v']))),
  ];
  for (const value of cases) {
    const fromIpamd = ipamdError({ ADDITIONAL_ENI_TAGS: value });
    const reason = fromIpamd.slice(fromIpamd.indexOf(' is invalid: ') + ' is invalid: '.length);
    assert.ok(fromIpamd.startsWith('ADDITIONAL_ENI_TAGS=') && reason.length > 0, fromIpamd);
    const fromChart = await chartError({ env: { ADDITIONAL_ENI_TAGS: value } });
    assert.ok(
      fromChart.includes(`env.ADDITIONAL_ENI_TAGS=${JSON.stringify(value)} is invalid: ${reason}`),
      `${value}: ${fromChart}`,
    );
    const extra = await chartError({ extraEnv: [{ name: 'ADDITIONAL_ENI_TAGS', value }] });
    assert.ok(extra.includes(`extraEnv[0] ADDITIONAL_ENI_TAGS=${JSON.stringify(value)} is invalid: ${reason}`), extra);
  }
});

test('ipFamily null or blank is refused, saying what is accepted; ipv6 takes ENABLE_PREFIX_DELEGATION=t', async () => {
  for (const values of [{ ipFamily: null }, { ipFamily: '' }])
    assert.match(await chartError(values), /value must be .*ipv4.*ipv6.*dual/, JSON.stringify(values));
  const objs = await renderChart({ ipFamily: 'ipv6', env: { ENABLE_PREFIX_DELEGATION: 't' } });
  const ds = objs.find((o) => o.kind === 'DaemonSet') as Obj;
  const env = new Map<string, string>(ds.spec.template.spec.containers[0].env.map((e: Obj) => [e.name, e.value]));
  assert.equal(env.get('ENABLE_IPv6'), 'true');
  assert.equal(env.get('ENABLE_PREFIX_DELEGATION'), 't');
  assert.equal(loadConfigReport(Object.fromEntries(env)).config.ipFamily, 'ipv6');
});

test('good values are accepted by both and rendered as ipamd reads them', async () => {
  const env = Object.fromEntries(GOOD.map(([n, v]) => [n, v]));
  const objs = await renderChart({ env });
  const ds = objs.find((o) => o.kind === 'DaemonSet') as Obj;
  const got = new Map<string, string>(ds.spec.template.spec.containers[0].env.map((e: Obj) => [e.name, e.value]));
  for (const [name, , text] of GOOD) assert.equal(got.get(name), text, name);
  assert.equal(ipamdError(Object.fromEntries(GOOD.map(([n, , t]) => [n, t]))), '');
});
