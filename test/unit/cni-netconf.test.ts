import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_IPAMD_SOCKET } from '../../proto/ipam.js';
import { CniError } from '../../cni-plugin/errors.js';
import { parseNetConf } from '../../cni-plugin/netconf.js';

const ok = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam' };
const failure = (raw: string) => {
  try {
    parseNetConf(raw);
  } catch (e) {
    assert.ok(e instanceof CniError, String(e));
    return e;
  }
  assert.fail(`accepted ${raw}`);
};

test('defaults: mtu 9001, vethPrefix eni, ipamdSocket, unknown keys kept', () => {
  const c = parseNetConf(JSON.stringify({ ...ok, capabilities: { portMappings: true } }));
  assert.equal(c.mtu, 9001);
  assert.equal(c.vethPrefix, 'eni');
  assert.equal(c.ipamdSocket, DEFAULT_IPAMD_SOCKET);
  assert.equal(c.logFile, undefined);
  assert.deepEqual(c.capabilities, { portMappings: true });
});

test('every supported cniVersion is accepted, with prevResult and runtimeConfig', () => {
  for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    const c = parseNetConf(
      JSON.stringify({
        ...ok,
        cniVersion: v,
        mtu: 1500,
        vethPrefix: 'pod',
        ipamdSocket: '/run/x.sock',
        logFile: '/var/log/p.log',
        prevResult: { ips: [] },
        runtimeConfig: {},
      }),
    );
    assert.equal(c.cniVersion, v);
    assert.equal(c.mtu, 1500);
    assert.equal(c.vethPrefix, 'pod');
  }
});

test('not JSON (or not an object) → code 6', () => {
  assert.equal(failure('{"cniVersion":').code, 6);
  assert.equal(failure('').code, 6);
  assert.equal(failure('[1,2]').code, 6);
  assert.equal(failure('"str"').code, 6);
});

test('unsupported cniVersion → code 1', () => {
  const e = failure(JSON.stringify({ ...ok, cniVersion: '9.9.9' }));
  assert.equal(e.code, 1);
  assert.match(e.msg, /9\.9\.9/);
  assert.equal(failure(JSON.stringify({ ...ok, cniVersion: '0.2.0' })).code, 1);
});

test('invalid fields → code 7 naming the field', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...ok, cniVersion: undefined }, /cniVersion/],
    [{ ...ok, cniVersion: 1 }, /cniVersion/],
    [{ ...ok, name: undefined }, /name/],
    [{ ...ok, name: '-bad' }, /name/],
    [{ ...ok, type: '' }, /type/],
    [{ ...ok, mtu: 100 }, /mtu/],
    [{ ...ok, mtu: 9001.5 }, /mtu/],
    [{ ...ok, mtu: '9001' }, /mtu/],
    [{ ...ok, vethPrefix: 'toolong' }, /vethPrefix.*1-4/],
    [{ ...ok, vethPrefix: '' }, /vethPrefix/],
    [{ ...ok, vethPrefix: 'eth' }, /reserved/],
    [{ ...ok, vethPrefix: 'a/b' }, /vethPrefix/],
    [{ ...ok, ipamdSocket: 'relative.sock' }, /ipamdSocket/],
    [{ ...ok, logFile: 3 }, /logFile/],
    [{ ...ok, prevResult: 'x' }, /prevResult/],
  ];
  for (const [conf, re] of cases) {
    const e = failure(JSON.stringify(conf));
    assert.equal(e.code, 7, JSON.stringify(conf));
    assert.match(e.details, re, JSON.stringify(conf));
  }
});
