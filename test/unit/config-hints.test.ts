/**
 * Start-up warnings about settings that would do nothing without a word (ipamd/config-hints.ts):
 * a setting's name in the wrong case or a letter or two off names the setting meant; a
 * setting that does nothing in the mode in force says so once, unless it holds its default
 * or aws-node's; the machine's and Kubernetes' own variables never warn.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfigReport } from '../../ipamd/config.js';

const V6 = { ENABLE_IPv6: 'true', ENABLE_IPv4: 'false', ENABLE_PREFIX_DELEGATION: 'true' };

test('a known name in the wrong case or a typo of one warns, naming the setting meant', () => {
  const cases: Array<[Record<string, string>, string, string]> = [
    [{ ENABLE_IPV6: 'true' }, 'ENABLE_IPV6', 'variable names are case-sensitive; did you mean ENABLE_IPv6?'],
    [{ ENABLE_IPV4: 'false' }, 'ENABLE_IPV4', 'variable names are case-sensitive; did you mean ENABLE_IPv4?'],
    [{ warm_ip_target: '3' }, 'warm_ip_target', 'did you mean WARM_IP_TARGET?'],
    [{ WARM_IP_TARGETS: '5' }, 'WARM_IP_TARGETS', 'no such setting; did you mean WARM_IP_TARGET?'],
    [{ WRAM_IP_TARGET: '5' }, 'WRAM_IP_TARGET', 'did you mean WARM_IP_TARGET?'],
    [{ MAX_ENIS: '2' }, 'MAX_ENIS', 'did you mean MAX_ENI?'],
    [{ ENI_IPAM_FAST_RESTARTS: 'false' }, 'ENI_IPAM_FAST_RESTARTS', 'did you mean ENI_IPAM_FAST_RESTART?'],
    [{ ENABLE_POD_ENIS: 'true' }, 'ENABLE_POD_ENIS', 'did you mean ENABLE_POD_ENI?'],
  ];
  for (const [env, name, says] of cases) {
    const r = loadConfigReport(env);
    assert.equal(r.warnings.length, 1, `${name}: ${r.warnings.join(' | ')}`);
    assert.ok(r.warnings[0]!.startsWith(`${name}=${JSON.stringify(Object.values(env)[0])} is ignored: `));
    assert.ok(r.warnings[0]!.endsWith(says), r.warnings[0]);
  }
  // The setting itself is not read from the look-alike: ENABLE_IPV6=true stays IPv4 (the warning is the news).
  assert.equal(loadConfigReport({ ENABLE_IPV6: 'true' }).config.ipFamily, 'ipv4');
});

test("the machine's, Kubernetes' and the AWS SDK's variables never warn", () => {
  const env: Record<string, string> = {
    PATH: '/usr/bin',
    HOME: '/root',
    HOSTNAME: 'ip-10-0-0-1',
    PWD: '/',
    SHLVL: '1',
    TERM: 'xterm',
    LANG: 'C.UTF-8',
    TZ: 'UTC',
    USER: 'root',
    NODE_ENV: 'production',
    NODE_OPTIONS: '--max-old-space-size=96',
    NODE_VERSION: '20.20.2',
    NODE_EXTRA_CA_CERTS: '/etc/ssl/x.pem',
    HTTP_PROXY: 'http://proxy:3128',
    HTTPS_PROXY: 'http://proxy:3128',
    NO_PROXY: '169.254.169.254',
    KUBECONFIG: '/etc/kubeconfig',
    KUBERNETES_SERVICE_HOST: '10.100.0.1',
    KUBERNETES_SERVICE_PORT: '443',
    KUBERNETES_PORT_443_TCP_ADDR: '10.100.0.1',
    ENI_IPAM_METRICS_SERVICE_HOST: '10.100.3.4',
    ENI_IPAM_METRICS_PORT_61678_TCP: 'tcp://10.100.3.4:61678',
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_ROLE_ARN: 'arn:aws:iam::1:role/x',
    AWS_WEB_IDENTITY_TOKEN_FILE: '/var/run/secrets/token',
    AWS_STS_REGIONAL_ENDPOINTS: 'regional',
    AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: 'IPv4',
    AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.23/v1/credentials',
    ENI_IPAM_TEST_WALL_OFFSET_FILE: '/tmp/x',
  };
  assert.deepEqual(loadConfigReport(env).warnings, []);
});

test('a setting that does nothing in the mode in force says so once; defaults and aws-node values do not', () => {
  const r = loadConfigReport({
    ...V6,
    WARM_IP_TARGET: '5',
    MAX_ENI: '2',
    AWS_VPC_K8S_CNI_EXTERNALSNAT: 'true',
    WARM_ENI_TARGET: '1', // the default and aws-node's
    WARM_PREFIX_TARGET: '1', // aws-node's
    AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS: '', // blank: unset
  });
  assert.deepEqual(
    r.warnings.map((w) => w.split('=')[0]),
    ['WARM_IP_TARGET', 'MAX_ENI', 'AWS_VPC_K8S_CNI_EXTERNALSNAT'],
  );
  for (const w of r.warnings) assert.match(w, /is ignored: it does nothing in IPv6 mode/);
  // Dual-stack keeps the IPv4 warm pool: the same settings are quiet there.
  assert.deepEqual(loadConfigReport({ ...V6, ENABLE_IPv4: 'true', WARM_IP_TARGET: '5', MAX_ENI: '2' }).warnings, []);
  // One line per setting even when several rules name it (IPv6 mode and no provisioning).
  const both = loadConfigReport({ ...V6, DISABLE_NETWORK_RESOURCE_PROVISIONING: 'true', MAX_ENI: '3' });
  assert.equal(both.warnings.length, 1);
  // Other modes.
  const pairs: Array<[Record<string, string>, string]> = [
    [{ AWS_VPC_K8S_CNI_EXTERNALSNAT: 'true', AWS_VPC_K8S_CNI_RANDOMIZESNAT: 'none' }, 'AWS_VPC_K8S_CNI_RANDOMIZESNAT'],
    [{ WARM_IP_TARGET: '3', WARM_ENI_TARGET: '2' }, 'WARM_ENI_TARGET'],
    [{ DISABLE_METRICS: 'true', METRICS_BIND_ADDRESS: ':9100' }, 'METRICS_BIND_ADDRESS'],
    [{ ENI_CONFIG_LABEL_DEF: 'topology.kubernetes.io/zone' }, 'ENI_CONFIG_LABEL_DEF'],
  ];
  for (const [env, name] of pairs)
    assert.deepEqual(
      loadConfigReport(env).warnings.map((w) => w.split('=')[0]),
      [name],
      JSON.stringify(env),
    );
  // A value spelled differently but equal to the default is the default.
  assert.deepEqual(loadConfigReport({ WARM_IP_TARGET: '3', WARM_ENI_TARGET: '01' }).warnings, []);
});
