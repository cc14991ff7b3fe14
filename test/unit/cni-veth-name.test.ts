import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  egressHostVethName,
  hostVethMac,
  hostVethName,
  hostVethNames,
  legacyHostVethName,
  podHostVethName,
  podVethMac,
  vethPrefixError,
} from '../../cni-plugin/veth-name.js';
import { egressVeth, egressVethNames } from '../../cni-plugin/wiring-plan.js';

const id = 'f'.repeat(64);
const pod = { namespace: 'default', name: 'web-0' };

test('host veth name of a pod: as amazon-vpc-cni-k8s names it, the name Calico, Cilium and the network policy agent look for', () => {
  // Upstream's pkg/networkutils/names.go: prefix + sha1("<namespace>.<pod>")[:11]; index n ≥ 1 hashes "<namespace>.<pod>.<n>".
  const sha1 = (s: string) => createHash('sha1').update(s).digest('hex').slice(0, 11);
  assert.equal(podHostVethName('eni', 'default', 'web-0'), `eni${sha1('default.web-0')}`);
  assert.equal(podHostVethName('eni', 'default', 'web-0', 2), `eni${sha1('default.web-0.2')}`);
  // A fixed value (computed apart, with Python's hashlib), so a change of hash or cut is seen here.
  assert.equal(
    podHostVethName('eni', 'kube-system', 'coredns-5d78c9869d-6g5nn'),
    'eni' + sha1('kube-system.coredns-5d78c9869d-6g5nn'),
  );
  assert.equal(podHostVethName('eni', 'default', 'nginx'), 'enic440f455693');
  for (const prefix of ['e', 'eni', 'pod_']) assert.equal(podHostVethName(prefix, 'a', 'b').length, prefix.length + 11);
  // The kubelet's eth0 is index 0, upstream's mNicIf<n> index n; the key does not change the pod's name.
  const owner = { containerId: id, ifName: 'eth0', pod };
  assert.equal(hostVethName('eni', owner), podHostVethName('eni', 'default', 'web-0'));
  assert.equal(hostVethName('eni', { ...owner, containerId: 'e'.repeat(64) }), hostVethName('eni', owner));
  assert.equal(hostVethName('eni', { ...owner, ifName: 'mNicIf1' }), podHostVethName('eni', 'default', 'web-0', 1));
  // Any other interface of the same pod gets a name of its own, never the first's.
  assert.notEqual(hostVethName('eni', { ...owner, ifName: 'net1' }), hostVethName('eni', owner));
});

test('host veth names: the current one first, then the one an earlier eni-ipam gave (sha256 of the key)', () => {
  const owner = { containerId: id, ifName: 'eth0', pod };
  assert.deepEqual(hostVethNames('eni', owner), [
    podHostVethName('eni', 'default', 'web-0'),
    legacyHostVethName('eni', id, 'eth0'),
  ]);
  // The older name is what main gave: prefix + sha256("name\0<id>\0<if>") cut to 15 characters.
  const old = createHash('sha256').update(`name\0${id}\0eth0`).digest('hex');
  assert.equal(legacyHostVethName('eni', id, 'eth0'), `eni${old.slice(0, 12)}`);
  // No pod (a runtime that sends no K8S_POD_* args): the key's name only.
  for (const p of [undefined, { namespace: '', name: 'x' }, { namespace: 'x', name: '' }])
    assert.deepEqual(hostVethNames('eni', { containerId: id, ifName: 'eth0', pod: p }), [
      legacyHostVethName('eni', id, 'eth0'),
    ]);
});

test('egress veth of an IPv6 pod: veth + hex as upstream egress plugin, outside the policy prefix, per sandbox', () => {
  const e = egressVeth(id, 'eth0');
  assert.match(e.hostVeth, /^veth[0-9a-f]{11}$/);
  assert.equal(e.hostVeth, egressHostVethName(id, 'eth0', 'v4if0'));
  assert.notEqual(egressVeth('e'.repeat(64), 'eth0').hostVeth, e.hostVeth);
  assert.deepEqual(egressVethNames('eni', id, 'eth0'), [e.hostVeth, legacyHostVethName('eni', id, 'eth0/v4if0')]);
});

test('legacy host veth name: prefix + hash, at most 15 characters, deterministic', () => {
  for (const prefix of ['e', 'eni', 'pod_']) {
    const n = legacyHostVethName(prefix, id, 'eth0');
    assert.equal(n.length, 15);
    assert.ok(n.startsWith(prefix));
    assert.match(n.slice(prefix.length), /^[0-9a-f]+$/);
    assert.equal(legacyHostVethName(prefix, id, 'eth0'), n);
  }
  assert.notEqual(legacyHostVethName('eni', id, 'eth0'), legacyHostVethName('eni', id, 'eth1'));
  assert.notEqual(legacyHostVethName('eni', id, 'eth0'), legacyHostVethName('eni', 'e'.repeat(64), 'eth0'));
});

test('prefix validation: 1-4 characters, safe charset, not reserved', () => {
  assert.equal(vethPrefixError('eni'), undefined);
  assert.equal(vethPrefixError('ab-_'), undefined);
  for (const bad of ['', 'abcde', 'eth', 'lo', 'vlan', 'a b', 'a/b', 'a:b']) assert.ok(vethPrefixError(bad), bad);
  assert.throws(() => hostVethName('abcde', { containerId: id, ifName: 'eth0' }), /1-4/);
  assert.throws(() => podHostVethName('eth', 'default', 'web-0'), /reserved/);
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
