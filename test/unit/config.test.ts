/**
 * ipamd config: every variable's default, a good value, bad values, one-line messages,
 * and the cross-field rules.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, describeEnvVars, loadConfig, type IpamdConfig } from '../../ipamd/config.js';

interface Row {
  name: string;
  key: keyof IpamdConfig;
  def: unknown;
  good: Array<[string, unknown]>;
  bad: string[];
}

const ROWS: Row[] = [
  {
    name: 'WARM_ENI_TARGET',
    key: 'warmEniTarget',
    def: 1,
    good: [
      ['0', 0],
      ['3', 3],
      [' 2 ', 2],
    ],
    bad: ['abc', '-1', '1.5', '1e3', '0x10'],
  },
  {
    name: 'WARM_IP_TARGET',
    key: 'warmIpTarget',
    def: undefined,
    good: [
      ['0', 0],
      ['10', 10],
    ],
    bad: ['abc', '-3', '2.0'],
  },
  {
    name: 'MINIMUM_IP_TARGET',
    key: 'minimumIpTarget',
    def: undefined,
    good: [
      ['0', 0],
      ['30', 30],
    ],
    bad: ['x', '-1'],
  },
  {
    name: 'ENABLE_PREFIX_DELEGATION',
    key: 'enablePrefixDelegation',
    def: false,
    good: [
      ['true', true],
      ['TRUE', true],
      ['1', true],
      ['False', false],
      ['0', false],
    ],
    bad: ['yes', 'on', '2'],
  },
  {
    name: 'MAX_ENI',
    key: 'maxEni',
    def: undefined,
    good: [
      ['1', 1],
      ['15', 15],
    ],
    bad: ['0', '-3', 'many'],
  },
  {
    name: 'IP_COOLDOWN_PERIOD',
    key: 'ipCooldownMs',
    def: 30_000,
    good: [
      ['0', 0],
      ['45', 45_000],
      ['0.5', 500],
      ['2m', 120_000],
    ],
    bad: ['-1', 'soon', '5d'],
  },
  {
    name: 'AWS_VPC_ENI_MTU',
    key: 'eniMtu',
    def: 9001,
    good: [
      ['576', 576],
      ['1500', 1500],
    ],
    bad: ['575', '9002', 'big'],
  },
  {
    name: 'AWS_VPC_K8S_CNI_VETHPREFIX',
    key: 'vethPrefix',
    def: 'eni',
    good: [
      ['veth', 'veth'],
      ['a1', 'a1'],
    ],
    bad: ['eth', 'lo', 'vlan', 'toolong', 'ABC', 'a-b'],
  },
  { name: 'AWS_VPC_K8S_CNI_EXTERNALSNAT', key: 'externalSnat', def: false, good: [['true', true]], bad: ['maybe'] },
  {
    name: 'AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS',
    key: 'excludeSnatCidrs',
    def: [],
    good: [
      ['10.0.0.0/8, 192.168.0.0/16', ['10.0.0.0/8', '192.168.0.0/16']],
      ['172.16.0.0/12,', ['172.16.0.0/12']],
    ],
    bad: ['10.0.0.0', '10.0.0.0/33', 'fd00::/8', '10.0.0.0/8,nope'],
  },
  { name: 'CLUSTER_NAME', key: 'clusterName', def: undefined, good: [['prod', 'prod']], bad: ['x'.repeat(257)] },
  {
    name: 'ADDITIONAL_ENI_TAGS',
    key: 'additionalEniTags',
    def: {},
    good: [['{"team":"net","cost":""}', { team: 'net', cost: '' }]],
    bad: [
      'not json',
      '[]',
      '"s"',
      '{"a":1}',
      '{"aws:x":"1"}',
      '{"AWS:x":"1"}',
      '{"node.k8s.amazonaws.com/instance_id":"i"}',
      '{"cluster.k8s.amazonaws.com/name":"c"}',
      `{"${'k'.repeat(129)}":"v"}`,
      `{"k":"${'v'.repeat(257)}"}`,
    ],
  },
  {
    name: 'DISABLE_LEAKED_ENI_CLEANUP',
    key: 'disableLeakedEniCleanup',
    def: false,
    good: [['1', true]],
    bad: ['nope'],
  },
  {
    name: 'DISABLE_NETWORK_RESOURCE_PROVISIONING',
    key: 'disableNetworkResourceProvisioning',
    def: false,
    good: [['true', true]],
    bad: ['nope'],
  },
  { name: 'MY_NODE_NAME', key: 'nodeName', def: undefined, good: [['node-1', 'node-1']], bad: ['n'.repeat(254)] },
  {
    name: 'AWS_EC2_ENDPOINT',
    key: 'ec2Endpoint',
    def: undefined,
    good: [['http://127.0.0.1:8080', 'http://127.0.0.1:8080']],
    bad: ['ftp://x', 'localhost:80', 'not a url'],
  },
  {
    name: 'AWS_EC2_METADATA_SERVICE_ENDPOINT',
    key: 'imdsEndpoint',
    def: 'http://169.254.169.254',
    good: [['https://imds.local', 'https://imds.local']],
    bad: ['169.254.169.254'],
  },
  {
    name: 'CRI_RUNTIME_ENDPOINT',
    key: 'criRuntimeEndpoint',
    def: undefined,
    good: [
      ['unix:///run/containerd/containerd.sock', '/run/containerd/containerd.sock'],
      ['/var/run/crio/crio.sock', '/var/run/crio/crio.sock'],
    ],
    bad: ['containerd.sock', 'tcp://1.2.3.4:5', 'unix://relative'],
  },
  {
    name: 'AWS_VPC_K8S_CNI_LOGLEVEL',
    key: 'logLevel',
    def: 'info',
    good: [
      ['DEBUG', 'debug'],
      ['trace', 'trace'],
      ['Fatal', 'fatal'],
    ],
    bad: ['loud', 'warning'],
  },
  { name: 'ENI_IPAM_LOG_FORMAT', key: 'logFormat', def: 'json', good: [['pretty', 'pretty']], bad: ['xml'] },
  {
    name: 'ENI_IPAM_SOCKET',
    key: 'socketPath',
    def: '/var/run/eni-ipam/ipamd.sock',
    good: [['/tmp/x.sock', '/tmp/x.sock']],
    bad: ['x.sock'],
  },
  {
    name: 'ENI_IPAM_CHECKPOINT_PATH',
    key: 'checkpointPath',
    def: '/var/run/eni-ipam/ipam.json',
    good: [['/tmp/c.json', '/tmp/c.json']],
    bad: ['c.json'],
  },
  {
    name: 'ENI_IPAM_AWS_NODE_CHECKPOINT_PATH',
    key: 'awsNodeCheckpointPath',
    def: '/var/run/aws-node/ipam.json',
    good: [['/tmp/a.json', '/tmp/a.json']],
    bad: ['ipam.json'],
  },
  {
    name: 'AWS_VPC_K8S_CNI_LOG_FILE',
    key: 'logFile',
    def: 'stdout',
    good: [
      ['stdout', 'stdout'],
      ['/host/var/log/aws-routed-eni/ipamd.log', '/host/var/log/aws-routed-eni/ipamd.log'],
    ],
    bad: ['ipamd.log', '/var/log/', 'stderr'],
  },
  {
    name: 'AWS_VPC_K8S_PLUGIN_LOG_FILE',
    key: 'pluginLogFile',
    def: '/var/log/aws-routed-eni/plugin.log',
    good: [['/tmp/p.log', '/tmp/p.log']],
    bad: ['stdout', 'plugin.log', '/var/log/'],
  },
  {
    name: 'ENI_IPAM_LOG_FILE_MAX_SIZE',
    key: 'logFileMaxSize',
    def: '100M',
    good: [
      ['10k', '10K'],
      ['1G', '1G'],
    ],
    bad: ['0M', '100', '1.5M', '10T'],
  },
  {
    name: 'ENI_IPAM_LOG_FILE_MAX_FILES',
    key: 'logFileMaxFiles',
    def: 5,
    good: [
      ['1', 1],
      ['20', 20],
    ],
    bad: ['0', '101', 'x'],
  },
  {
    name: 'METRICS_BIND_ADDRESS',
    key: 'metricsBindAddress',
    def: ':61678',
    good: [
      ['0.0.0.0:9100', '0.0.0.0:9100'],
      ['[::1]:80', '[::1]:80'],
      ['localhost:0', 'localhost:0'],
    ],
    bad: ['61678', ':99999', 'a b:1', '::1:80'],
  },
  {
    name: 'INTROSPECTION_BIND_ADDRESS',
    key: 'introspectionBindAddress',
    def: '127.0.0.1:61679',
    good: [[':1', ':1']],
    bad: ['127.0.0.1'],
  },
  { name: 'DISABLE_METRICS', key: 'disableMetrics', def: false, good: [['true', true]], bad: ['y'] },
  { name: 'DISABLE_INTROSPECTION', key: 'disableIntrospection', def: false, good: [['1', true]], bad: ['y'] },
  {
    name: 'ENI_IPAM_ADD_WAIT_TIMEOUT',
    key: 'addWaitTimeoutMs',
    def: 10_000,
    good: [
      ['3s', 3_000],
      ['500ms', 500],
      ['0', 0],
      ['1.5', 1_500],
      ['1h', 3_600_000],
    ],
    bad: ['3 s', '-1', 's', '1.5.2', '10x'],
  },
  {
    name: 'ENI_IPAM_CNI_IPAMD_WAIT',
    key: 'cniIpamdWaitMs',
    def: 10_000,
    good: [
      ['0', 0],
      ['2500ms', 2_500],
      ['300s', 300_000],
    ],
    bad: ['301s', '1h', 'soon'],
  },
  {
    name: 'ENI_IPAM_SHRINK_DELAY',
    key: 'shrinkDelayMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['2m', 120_000],
      ['596h', 596 * 3_600_000],
    ],
    bad: ['later', '597h', '99999999999999999999'],
  },
  {
    name: 'ENI_IPAM_RECONCILE_INTERVAL',
    key: 'reconcileIntervalMs',
    def: 60_000,
    good: [['30s', 30_000]],
    bad: ['0', 'often'],
  },
  { name: 'ENI_IPAM_GC_INTERVAL', key: 'gcIntervalMs', def: 60_000, good: [['1m', 60_000]], bad: ['0ms'] },
  {
    name: 'ENI_IPAM_GC_GRACE',
    key: 'gcGraceMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['90s', 90_000],
    ],
    bad: ['-1', 'soon'],
  },
  {
    name: 'ENI_IPAM_NETWORK_NAME',
    key: 'networkName',
    def: 'aws-cni',
    good: [['my-net', 'my-net']],
    bad: ['n'.repeat(129)],
  },
  {
    name: 'ENI_IPAM_POOL_INTERVAL',
    key: 'poolIntervalMs',
    def: 5_000,
    good: [['200ms', 200]],
    bad: ['0', '-5', '1000h'],
  },
  {
    name: 'ENI_IPAM_MIN_ENI_AGE',
    key: 'minEniAgeMs',
    def: 60_000,
    good: [
      ['0', 0],
      ['2m', 120_000],
    ],
    bad: ['-1', 'old'],
  },
  {
    name: 'ENI_IPAM_IMDS_ENI_WAIT',
    key: 'imdsEniWaitMs',
    def: 30_000,
    good: [
      ['0', 0],
      ['90s', 90_000],
    ],
    bad: ['never'],
  },
  {
    name: 'ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL',
    key: 'leakedEniSweepIntervalMs',
    def: 3_600_000,
    good: [['30m', 1_800_000]],
    bad: ['0', 'hourly'],
  },
  {
    name: 'ENI_IPAM_LEAKED_ENI_SWEEP_JITTER',
    key: 'leakedEniSweepJitterMs',
    def: 300_000,
    good: [
      ['0', 0],
      ['10s', 10_000],
    ],
    bad: ['-1'],
  },
];

function expectError(env: NodeJS.ProcessEnv, variable: string): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `a ConfigError, got ${String(e)}`);
    assert.equal(e.variable, variable);
    assert.ok(!e.message.includes('\n'), `one line: ${e.message}`);
    assert.ok(e.message.startsWith(`${variable}=`), `names the variable first: ${e.message}`);
    return e;
  }
  assert.fail(`${JSON.stringify(env)} must be rejected`);
}

test('every variable: default, good values, bad values with a one-line message', async (t) => {
  const defaults = loadConfig({});
  for (const r of ROWS) {
    await t.test(r.name, () => {
      assert.deepEqual(defaults[r.key], r.def, 'default');
      assert.deepEqual(loadConfig({ [r.name]: '' })[r.key], r.def, 'empty string = unset');
      for (const [raw, want] of r.good)
        assert.deepEqual(loadConfig({ [r.name]: raw })[r.key], want, `${r.name}=${raw}`);
      for (const raw of r.bad) {
        const e = expectError({ [r.name]: raw }, r.name);
        assert.ok(
          e.message.includes(JSON.stringify(raw.length > 120 ? `${raw.slice(0, 120)}…` : raw)),
          `shows the value: ${e.message}`,
        );
        assert.match(e.message, / is invalid: .*(expected|must|reserved|at most|not)/, e.message);
      }
    });
  }
});

test('the message is the documented shape', () => {
  assert.equal(
    expectError({ WARM_IP_TARGET: 'abc' }, 'WARM_IP_TARGET').message,
    'WARM_IP_TARGET="abc" is invalid: expected a whole number >= 0',
  );
  assert.equal(
    expectError({ AWS_VPC_K8S_CNI_LOGLEVEL: 'loud' }, 'AWS_VPC_K8S_CNI_LOGLEVEL').message,
    'AWS_VPC_K8S_CNI_LOGLEVEL="loud" is invalid: expected one of trace, debug, info, warn, error, fatal',
  );
  const e = expectError({ ADDITIONAL_ENI_TAGS: '{"a":\n1}' }, 'ADDITIONAL_ENI_TAGS');
  assert.ok(!e.message.includes('\n'), 'a newline in the value is escaped');
});

test('POD_MTU defaults to AWS_VPC_ENI_MTU', () => {
  assert.equal(loadConfig({}).podMtu, 9001);
  assert.equal(loadConfig({ AWS_VPC_ENI_MTU: '1500' }).podMtu, 1500);
  assert.equal(loadConfig({ AWS_VPC_ENI_MTU: '1500', POD_MTU: '1400' }).podMtu, 1400);
  expectError({ POD_MTU: '100' }, 'POD_MTU');
  expectError({ POD_MTU: '9002' }, 'POD_MTU');
});

test('WARM_PREFIX_TARGET needs ENABLE_PREFIX_DELEGATION', () => {
  const e = expectError({ WARM_PREFIX_TARGET: '1' }, 'WARM_PREFIX_TARGET');
  assert.match(e.message, /ENABLE_PREFIX_DELEGATION/);
  expectError({ WARM_PREFIX_TARGET: '1', ENABLE_PREFIX_DELEGATION: 'false' }, 'WARM_PREFIX_TARGET');
  expectError({ WARM_PREFIX_TARGET: 'x', ENABLE_PREFIX_DELEGATION: 'true' }, 'WARM_PREFIX_TARGET');
  const c = loadConfig({ WARM_PREFIX_TARGET: '2', ENABLE_PREFIX_DELEGATION: 'true' });
  assert.equal(c.warmPrefixTarget, 2);
  assert.equal(c.enablePrefixDelegation, true);
  assert.equal(loadConfig({}).warmPrefixTarget, undefined);
});

test('prefix delegation with IP targets is allowed (they count IPs)', () => {
  const c = loadConfig({ ENABLE_PREFIX_DELEGATION: 'true', WARM_IP_TARGET: '5', MINIMUM_IP_TARGET: '10' });
  assert.equal(c.warmIpTarget, 5);
  assert.equal(c.minimumIpTarget, 10);
});

test('unrelated variables are ignored; the result has no undefined-valued keys', () => {
  const c = loadConfig({ PATH: '/bin', HOME: '/root', WARM_IP_TARGET: '' });
  assert.ok(!Object.values(c).includes(undefined));
  assert.ok(!('warmIpTarget' in c));
});

test('describeEnvVars lists every variable with a default and a description', () => {
  const d = describeEnvVars();
  const names = d.map((x) => x.name);
  for (const r of ROWS) assert.ok(names.includes(r.name), r.name);
  for (const n of ['WARM_PREFIX_TARGET', 'POD_MTU']) assert.ok(names.includes(n), n);
  assert.equal(new Set(names).size, names.length, 'no duplicates');
  for (const x of d) {
    assert.ok(x.default.length > 0 && x.description.length > 0, x.name);
  }
  assert.equal(d.find((x) => x.name === 'WARM_ENI_TARGET')?.default, '1');
  assert.equal(d.find((x) => x.name === 'MAX_ENI')?.default, 'instance limit');
});
