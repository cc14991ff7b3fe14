/**
 * The chart with the real helm: `helm lint` passes, and values.schema.json refuses a
 * value of the wrong type or an unknown key, naming the field.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CHART, helm, renderChart } from '../../kit/helm.js';

test('helm lint passes on the chart (strict: warnings fail too)', async () => {
  const r = await helm(['lint', '--strict', CHART]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
});

test('a value of the wrong type is refused by values.schema.json, naming the field', async () => {
  await assert.rejects(renderChart({ metrics: { port: 'sixty' } }), /\/metrics\/port': got string, want integer/);
  await assert.rejects(renderChart({ tolerations: { operator: 'Exists' } }), /\/tolerations': got object, want array/);
  await assert.rejects(
    renderChart({ serviceAccount: { annotations: { 'eks.amazonaws.com/role-arn': 42 } } }),
    /serviceAccount\/annotations\/eks.amazonaws.com~1role-arn': got number, want string/,
  );
  await assert.rejects(renderChart({ image: { digest: 'latest' } }), /\/image\/digest'/);
  await assert.rejects(renderChart({ criSocket: 'containerd' }), /\/criSocket'/);
  await assert.rejects(
    renderChart({ grafanaDashboard: { labels: { grafana_dashboard: 1 } } }),
    /grafanaDashboard\/labels\/grafana_dashboard': got number, want string/,
  );
  await assert.rejects(
    renderChart({ prometheusRule: { create: 'yes' } }),
    /\/prometheusRule\/create': got string, want boolean/,
  );
  // A surge pod's ipamd would start beside the live one on the same node (one ipamd per node).
  await assert.rejects(
    renderChart({ updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }),
    /\/updateStrategy\/rollingUpdate\/maxSurge': value must be one of 0, '0', '0%'/,
  );
  await renderChart({ updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } });
});

test('env.* is typed key by key: a bad value or an unknown key is refused, naming it', async () => {
  await assert.rejects(renderChart({ env: { WARM_ENI_TARGET: 'abc' } }), /\/env\/WARM_ENI_TARGET'/);
  await assert.rejects(renderChart({ env: { ENABLE_IPv6: 'yes' } }), /\/env\/ENABLE_IPv6'/);
  await assert.rejects(renderChart({ env: { AWS_VPC_K8S_CNI_LOGLEVEL: 'loud' } }), /\/env\/AWS_VPC_K8S_CNI_LOGLEVEL'/);
  await assert.rejects(renderChart({ env: { WARM_IP_TARGE: '5' } }), /WARM_IP_TARGE/);
  // What an aws-node user copies over renders: numbers and booleans unquoted, upstream's defaults.
  await renderChart({
    env: {
      WARM_ENI_TARGET: 2,
      ENABLE_PREFIX_DELEGATION: false,
      WARM_PREFIX_TARGET: '1',
      ENABLE_IPv6: 'false',
      ENABLE_IPv4: true,
      AWS_VPC_K8S_CNI_LOGLEVEL: 'DEBUG',
      AWS_VPC_K8S_CNI_RANDOMIZESNAT: 'prng',
      AWS_VPC_CNI_NODE_PORT_SUPPORT: 'true',
      VPC_CNI_VERSION: 'v1.23.1',
      NETWORK_POLICY_ENFORCING_MODE: 'standard',
      IP_COOLDOWN_PERIOD: 30,
    },
  });
});

test('an env var the chart sets from another value is refused in env, naming that value', async () => {
  await assert.rejects(
    renderChart({ env: { CRI_RUNTIME_ENDPOINT: 'unix:///var/run/crio/crio.sock' } }),
    /env\.CRI_RUNTIME_ENDPOINT is set by the chart from criSocket; set that instead/,
  );
});

test('helm lint --strict passes with non-default values too', async () => {
  const r = await helm([
    'lint',
    '--strict',
    CHART,
    '--set',
    'podMonitor.create=true,serviceMonitor.create=true,rbac.nodeEventsAndStatus=true,taintWhenExhausted=true,grafanaDashboard.create=true,prometheusRule.create=true,eniConfig.createCrd=true',
    '--set',
    'criSocket=/var/run/crio/crio.sock',
    '--set-string',
    'image.digest=sha256:' + '0'.repeat(64),
    '--set',
    'imagePullSecrets[0].name=regcred',
  ]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
});

test('an unknown key (a typo) is refused, naming it', async () => {
  await assert.rejects(
    renderChart({ nodeSelectr: { 'kubernetes.io/os': 'linux' } }),
    /additional properties 'nodeSelectr' not allowed/,
  );
  await assert.rejects(
    renderChart({ podMonitor: { enabled: true } }),
    /podMonitor': additional properties 'enabled' not allowed/,
  );
});
