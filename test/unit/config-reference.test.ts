/**
 * The configuration reference and the aws-node table: docs/configuration.md and the
 * chart's `env` schema are what the spec renders (they fail here when they drift), and
 * every aws-node variable eni-ipam refuses or ignores does so, by name, with one line
 * naming it; upstream's defaults (its chart's env) never stop ipamd.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { AWS_NODE_VARS } from '../../ipamd/aws-node-vars.js';
import { ConfigError, configSpecs, loadConfig, loadConfigReport } from '../../ipamd/config.js';
import { chartSchemaParts, renderConfigReference, verdictCounts } from '../../ipamd/config-reference.js';

const root = new URL('../../../', import.meta.url);
const regen = 'regenerate: npm run build && node scripts/config-reference.mjs';

test('docs/configuration.md is what the config spec renders', () => {
  const committed = readFileSync(new URL('docs/configuration.md', root), 'utf8');
  assert.equal(committed, renderConfigReference(configSpecs()), `docs/configuration.md drifted; ${regen}`);
});

test("values.schema.json's env typing is what the config spec renders", () => {
  const schema = JSON.parse(readFileSync(new URL('charts/eni-ipam/values.schema.json', root), 'utf8'));
  const parts = chartSchemaParts(configSpecs());
  assert.deepEqual(schema.properties.env, parts.env, `values.schema.json env drifted; ${regen}`);
  assert.deepEqual(schema.properties.extraEnv, parts.extraEnv, `values.schema.json extraEnv drifted; ${regen}`);
  assert.deepEqual(schema.definitions.envCheck, parts.envCheck, `values.schema.json envCheck drifted; ${regen}`);
  // Every variable ipamd reads is typed, and nothing else is allowed.
  const keys = Object.keys(schema.properties.env.properties);
  for (const s of configSpecs()) assert.ok(keys.includes(s.name), s.name);
  for (const r of AWS_NODE_VARS) assert.ok(keys.includes(r.name), r.name);
  assert.equal(schema.properties.env.additionalProperties, false);
});

/** Refused unless unset or one of the accepted values: name → [a refused value, text its line must hold]. */
const REFUSED: Record<string, [string, RegExp]> = {
  ENABLE_POD_ENI: ['true', /security groups for pods/],
  ENABLE_MULTI_NIC: ['true', /multi-NIC/],
  ENABLE_IMDS_ONLY_MODE: ['true', /DISABLE_NETWORK_RESOURCE_PROVISIONING=true/],
  ENABLE_V6_EGRESS: ['true', /IPv6 egress/],
  AWS_EXTERNAL_SERVICE_CIDRS: ['10.0.0.0/8', /external service CIDRs; accepted: unset$/],
};

/** Ignored with one warning: name → [a value that warns, the values that pass silently]. */
const WARNED: Record<string, [string, string[]]> = {
  POD_SECURITY_GROUP_ENFORCING_MODE: ['standard', ['strict']],
  AWS_VPC_K8S_CNI_BACKING_STORE: ['/var/lib/ipam.json', ['/var/run/aws-node/ipam.json']],
  MANAGE_UNTAGGED_ENI: ['true', ['false', '0']],
  ANNOTATE_POD_IP: ['true', ['false']],
  CLUSTER_ENDPOINT: ['https://api.example:443', []],
  HTTP_TIMEOUT: ['30', []],
  VPC_CNI_VERSION: ['1.23', ['v1.23.1', 'v1.19.0-eksbuild.1']],
  MY_POD_NAME: ['Aws Node', ['aws-node-x7k2p']],
  DISABLE_TCP_EARLY_DEMUX: ['true', ['false']],
  DISABLE_POD_V6: ['true', ['false']],
  ENABLE_V4_EGRESS: ['false', ['true']],
  AWS_VPC_K8S_PLUGIN_LOG_LEVEL: ['INFO', ['DEBUG', 'debug']],
  AWS_VPC_K8S_EGRESS_V4_PLUGIN_LOG_FILE: ['/var/log/aws-routed-eni/egress-v4-plugin.log', []],
  AWS_VPC_K8S_EGRESS_V6_PLUGIN_LOG_FILE: ['/var/log/aws-routed-eni/egress-v6-plugin.log', []],
  HOST_CNI_BIN_PATH: ['/host/usr/libexec/cni', ['/host/opt/cni/bin']],
  HOST_CNI_CONFDIR_PATH: ['/host/etc/cni/conf.d', ['/host/etc/cni/net.d']],
  AWS_VPC_K8S_CNI_CONFIGURE_RPFILTER: ['false', []],
  ENABLE_NFTABLES: ['true', []],
};

test('the table: refused and warned variables are exactly the ones named here; honoured ones are in the spec', () => {
  const of = (v: string) => AWS_NODE_VARS.filter((r) => r.verdict === v).map((r) => r.name);
  assert.deepEqual(of('refused').sort(), Object.keys(REFUSED).sort());
  assert.deepEqual(of('warned').sort(), Object.keys(WARNED).sort());
  const names = AWS_NODE_VARS.map((r) => r.name);
  assert.equal(new Set(names).size, names.length, 'each variable once');
  const spec = new Set(configSpecs().map((s) => s.name));
  for (const r of AWS_NODE_VARS) {
    if (r.verdict !== 'honoured') assert.ok(!spec.has(r.name), `${r.name} is ${r.verdict} but the spec reads it`);
    else assert.ok(spec.has(r.name) || r.landing, `${r.name} is honoured but not in the config spec`);
  }
  const n = verdictCounts();
  assert.equal(n.honoured + n.refused + n.warned, AWS_NODE_VARS.length);
});

for (const [name, [value, says]] of Object.entries(REFUSED)) {
  test(`refused: ${name}=${value} stops ipamd with one line naming it; its default does not`, () => {
    const row = AWS_NODE_VARS.find((r) => r.name === name)!;
    assert.throws(
      () => loadConfig({ [name]: value }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.variable === name &&
        e.message.startsWith(`${name}=${JSON.stringify(value)} is refused: `) &&
        !e.message.includes('\n') &&
        says.test(e.message),
    );
    for (const ok of [...(row.quiet ?? []), '', ` ${(row.quiet ?? [''])[0]!.toUpperCase()} `])
      assert.deepEqual(loadConfigReport({ [name]: ok }).warnings, [], `${name}=${JSON.stringify(ok)} is accepted`);
    assert.throws(() => loadConfig({ [name]: 'maybe' }), /accepted: unset/, `${name}=maybe names the accepted values`);
  });
}

for (const [name, [value, quiet]] of Object.entries(WARNED)) {
  test(`warned: ${name}=${value} is accepted with one warning naming it`, () => {
    const r = loadConfigReport({ [name]: value });
    assert.equal(r.warnings.length, 1, r.warnings.join('\n'));
    assert.ok(r.warnings[0]!.startsWith(`${name}=${JSON.stringify(value)} is ignored: `), r.warnings[0]);
    assert.ok(!r.warnings[0]!.includes('\n'));
    assert.deepEqual(r.config, loadConfig({}), 'changes nothing');
    for (const q of ['', ...quiet]) assert.deepEqual(loadConfigReport({ [name]: q }).warnings, [], `${name}=${q}`);
  });
}

test("amazon-vpc-cni-k8s's DaemonSet env (v1.23.1) starts ipamd without a warning, in every mode", () => {
  const upstream = {
    ADDITIONAL_ENI_TAGS: '{}',
    AWS_VPC_CNI_NODE_PORT_SUPPORT: 'true',
    AWS_VPC_ENI_MTU: '9001',
    AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'false',
    AWS_VPC_K8S_CNI_EXTERNALSNAT: 'false',
    AWS_VPC_K8S_CNI_LOG_FILE: '/host/var/log/aws-routed-eni/ipamd.log',
    AWS_VPC_K8S_CNI_LOGLEVEL: 'DEBUG',
    AWS_VPC_K8S_CNI_RANDOMIZESNAT: 'prng',
    AWS_VPC_K8S_CNI_VETHPREFIX: 'eni',
    AWS_VPC_K8S_PLUGIN_LOG_FILE: '/var/log/aws-routed-eni/plugin.log',
    AWS_VPC_K8S_PLUGIN_LOG_LEVEL: 'DEBUG',
    DISABLE_INTROSPECTION: 'false',
    DISABLE_METRICS: 'false',
    ENABLE_POD_ENI: 'false',
    ENABLE_PREFIX_DELEGATION: 'false',
    WARM_ENI_TARGET: '1',
    WARM_PREFIX_TARGET: '1',
    DISABLE_NETWORK_RESOURCE_PROVISIONING: 'false',
    ENABLE_IPv4: 'true',
    ENABLE_IPv6: 'false',
    ENABLE_SUBNET_DISCOVERY: 'true',
    VPC_CNI_VERSION: 'v1.23.1',
    NETWORK_POLICY_ENFORCING_MODE: 'standard',
    ENABLE_IMDS_ONLY_MODE: 'false',
    ENABLE_MULTI_NIC: 'false',
    DISABLE_TCP_EARLY_DEMUX: 'false',
    MY_NODE_NAME: 'ip-10-0-1-23.ec2.internal',
    MY_POD_NAME: 'aws-node-x7k2p',
  };
  const r = loadConfigReport(upstream);
  assert.deepEqual(r.warnings, []);
  assert.equal(r.config.logLevel, 'debug');
  assert.equal(r.config.warmPrefixTarget, undefined);
  // Its IPv6 install (the same env with the family and prefix delegation switched) and a later version.
  const v6 = { ...upstream, ENABLE_IPv6: 'true', ENABLE_IPv4: 'false', ENABLE_PREFIX_DELEGATION: 'true' };
  assert.deepEqual(loadConfigReport({ ...v6, VPC_CNI_VERSION: 'v1.24.0' }).warnings, []);
  // A value of its own does warn, once, naming the variable.
  assert.deepEqual(
    loadConfigReport({ ...upstream, AWS_VPC_K8S_PLUGIN_LOG_LEVEL: 'INFO', WARM_PREFIX_TARGET: '3' }).warnings.map(
      (w) => w.split('=')[0],
    ),
    ['AWS_VPC_K8S_PLUGIN_LOG_LEVEL', 'WARM_PREFIX_TARGET'],
  );
});

test('each effective setting says where it came from: default, env or chart', () => {
  const r = loadConfigReport({
    WARM_ENI_TARGET: '2',
    AWS_VPC_ENI_MTU: '1500',
    ENI_IPAM_CHART_ENV: 'WARM_ENI_TARGET,ENI_IPAM_CHART_ENV',
  });
  const from = Object.fromEntries(r.sources.map((s) => [s.name, s.source]));
  assert.equal(from.WARM_ENI_TARGET, 'chart');
  assert.equal(from.AWS_VPC_ENI_MTU, 'env');
  assert.equal(from.POD_MTU, 'default');
  assert.equal(r.sources.length, configSpecs().length);
});
