/**
 * ENABLE_IPv4/ENABLE_IPv6 → the IP family ipamd serves (ipamd/config-family.ts), and each
 * refusal as one line naming its variable.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../ipamd/config.js';

function refusal(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    assert.ok(e instanceof ConfigError, `a ConfigError, got ${String(e)}`);
    assert.ok(!e.message.includes('\n'), `one line: ${e.message}`);
    return e;
  }
  assert.fail(`${JSON.stringify(env)} must be refused`);
}

test('the family: ipv4 by default, ipv6 as upstream, dual as our extension', () => {
  assert.equal(loadConfig({}).ipFamily, 'ipv4');
  const pd = { ENABLE_PREFIX_DELEGATION: 'true' };
  assert.equal(loadConfig({ ...pd, ENABLE_IPv6: 'true', ENABLE_IPv4: 'false' }).ipFamily, 'ipv6');
  assert.equal(loadConfig({ ...pd, ENABLE_IPv6: 'true' }).ipFamily, 'dual');
  assert.equal(loadConfig({ ...pd, ENABLE_IPv6: '1', ENABLE_IPv4: 'TRUE' }).ipFamily, 'dual');
  assert.equal(loadConfig({ ENABLE_IPv6: 'false', ENABLE_IPv4: 'true' }).ipFamily, 'ipv4');
});

test('IPv6 without prefix delegation is refused naming ENABLE_PREFIX_DELEGATION', () => {
  for (const env of [{ ENABLE_IPv6: 'true', ENABLE_IPv4: 'false' }, { ENABLE_IPv6: 'true' }]) {
    const e = refusal(env);
    assert.equal(e.variable, 'ENABLE_PREFIX_DELEGATION');
    assert.match(
      e.message,
      /^ENABLE_PREFIX_DELEGATION=false is refused: ENABLE_IPv6=true .*needs ENABLE_PREFIX_DELEGATION=true$/,
    );
  }
});

test('IPv6 with custom networking is refused naming AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG', () => {
  const e = refusal({
    ENABLE_IPv6: 'true',
    ENABLE_IPv4: 'false',
    ENABLE_PREFIX_DELEGATION: 'true',
    AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: 'true',
  });
  assert.equal(e.variable, 'AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG');
  assert.match(
    e.message,
    /^AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true is refused: .*\(ipv6 mode\) does not support custom networking/,
  );
});

test('both families off is refused naming ENABLE_IPv4', () => {
  const e = refusal({ ENABLE_IPv4: 'false' });
  assert.equal(e.variable, 'ENABLE_IPv4');
  assert.match(e.message, /^ENABLE_IPv4=false is refused with ENABLE_IPv6=false: ipamd would serve no family/);
});

test('a bad boolean names the variable and what it accepts', () => {
  const e = refusal({ ENABLE_IPv6: 'yes' });
  assert.equal(e.variable, 'ENABLE_IPv6');
  assert.match(
    e.message,
    /^ENABLE_IPv6="yes" is invalid: expected a boolean: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False \(the spellings of strconv.ParseBool; true and false in any case\)$/,
  );
  // aws-node's ParseBool spellings mean the same here.
  assert.equal(loadConfig({ ENABLE_IPv6: 'f' }).ipFamily, 'ipv4');
  assert.equal(loadConfig({ ENABLE_PREFIX_DELEGATION: 'T', ENABLE_IPv6: 't', ENABLE_IPv4: 'F' }).ipFamily, 'ipv6');
});
