import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hostVethMac, hostVethName, podVethMac, vethPrefixError } from '../../cni-plugin/veth-name.js';

const id = 'f'.repeat(64);

test('host veth name: prefix + hash, at most 15 characters, deterministic', () => {
  for (const prefix of ['e', 'eni', 'pod_']) {
    const n = hostVethName(prefix, id, 'eth0');
    assert.equal(n.length, 15);
    assert.ok(n.startsWith(prefix));
    assert.match(n.slice(prefix.length), /^[0-9a-f]+$/);
    assert.equal(hostVethName(prefix, id, 'eth0'), n);
  }
  assert.notEqual(hostVethName('eni', id, 'eth0'), hostVethName('eni', id, 'eth1'));
  assert.notEqual(hostVethName('eni', id, 'eth0'), hostVethName('eni', 'e'.repeat(64), 'eth0'));
});

test('prefix validation: 1-4 characters, safe charset, not reserved', () => {
  assert.equal(vethPrefixError('eni'), undefined);
  assert.equal(vethPrefixError('ab-_'), undefined);
  for (const bad of ['', 'abcde', 'eth', 'lo', 'vlan', 'a b', 'a/b', 'a:b']) assert.ok(vethPrefixError(bad), bad);
  assert.throws(() => hostVethName('abcde', id, 'eth0'), /1-4/);
});

test('MACs: deterministic, locally administered unicast, host ≠ pod', () => {
  const h = hostVethMac(id, 'eth0');
  const p = podVethMac(id, 'eth0');
  for (const m of [h, p]) {
    assert.match(m, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    const first = parseInt(m.slice(0, 2), 16);
    assert.equal(first & 0x01, 0, 'unicast');
    assert.equal(first & 0x02, 0x02, 'locally administered');
  }
  assert.notEqual(h, p);
  assert.equal(hostVethMac(id, 'eth0'), h);
});
