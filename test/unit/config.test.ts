/**
 * ipamd config: every variable's default, a good value, bad values, one-line messages,
 * and the cross-field rules.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, describeEnvVars, loadConfig, loadConfigReport } from '../../ipamd/config.js';
import type { Row } from '../helpers/config-row.js';
import { NODE_ROWS } from '../helpers/config-rows-node.js';
import { TIMING_ROWS } from '../helpers/config-rows-timing.js';

/** Every variable's row, in the env table's order. */
const ROWS: Row[] = [...NODE_ROWS, ...TIMING_ROWS];

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
    'AWS_VPC_K8S_CNI_LOGLEVEL="loud" is invalid: expected one of trace, debug, info, warn, error, fatal (any case)',
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

test("WARM_PREFIX_TARGET without ENABLE_PREFIX_DELEGATION is ignored, with one warning unless it is aws-node's 1", () => {
  // amazon-vpc-cni-k8s's own DaemonSet sets WARM_PREFIX_TARGET=1 with prefix delegation off: no warning for that.
  for (const env of [{ WARM_PREFIX_TARGET: '1' }, { WARM_PREFIX_TARGET: '1', ENABLE_PREFIX_DELEGATION: 'false' }]) {
    const r = loadConfigReport(env);
    assert.equal(r.config.warmPrefixTarget, undefined);
    assert.deepEqual(r.warnings, []);
  }
  const w = loadConfigReport({ WARM_PREFIX_TARGET: '4' });
  assert.equal(w.config.warmPrefixTarget, undefined);
  assert.equal(w.warnings.length, 1);
  assert.match(w.warnings[0]!, /^WARM_PREFIX_TARGET="4" is ignored: .*ENABLE_PREFIX_DELEGATION=true/);
  expectError({ WARM_PREFIX_TARGET: 'x', ENABLE_PREFIX_DELEGATION: 'true' }, 'WARM_PREFIX_TARGET');
  expectError({ WARM_PREFIX_TARGET: 'x' }, 'WARM_PREFIX_TARGET');
  const r = loadConfigReport({ WARM_PREFIX_TARGET: '2', ENABLE_PREFIX_DELEGATION: 'true' });
  assert.equal(r.config.warmPrefixTarget, 2);
  assert.equal(r.config.enablePrefixDelegation, true);
  assert.deepEqual(r.warnings, []);
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

test('NETWORK_POLICY_ENFORCING_MODE: a value the agent does not accept is refused, naming standard and strict', () => {
  for (const raw of ['none', 'Disabled'])
    assert.equal(
      expectError({ NETWORK_POLICY_ENFORCING_MODE: raw }, 'NETWORK_POLICY_ENFORCING_MODE').message,
      `NETWORK_POLICY_ENFORCING_MODE=${JSON.stringify(raw)} is invalid: expected one of standard, strict (any case)`,
    );
  assert.deepEqual(loadConfigReport({ NETWORK_POLICY_ENFORCING_MODE: 'strict' }).warnings, [], 'strict: no warning');
});
