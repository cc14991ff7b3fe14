/**
 * Pure parts of ipamd's host networking and the plugin's pod rules: the VPC router
 * address, rule convergence lines, the SNAT chain text, the node rules, and the pod
 * rule lines of the plugin.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { policyRoutingLines, type WiringPlan } from '../../cni-plugin/wiring.js';
import { subnetGateway } from '../../ipamd/network/eni-links.js';
import { podRouteTable } from '../../netfacts/routing.js';
import { nodeRules } from '../../ipamd/network/host-network.js';
import { ruleLine, ruleSyncLines, type IpRule } from '../../ipamd/network/ip-rules.js';
import { snatChainRestore } from '../../ipamd/network/snat.js';
import { connmarkRuleSpecs, splitRuleLine } from '../../ipamd/network/connmark.js';

test('subnet gateway is the first host address', () => {
  assert.equal(subnetGateway('10.0.0.0/24'), '10.0.0.1');
  assert.equal(subnetGateway('10.0.1.64/26'), '10.0.1.65');
  assert.equal(subnetGateway('192.168.255.0/24'), '192.168.255.1');
  assert.throws(() => subnetGateway('fd00::/64'));
});

test('the pods of the primary ENI use main, those of the ENI at device d table d+1', () => {
  assert.equal(podRouteTable({ deviceNumber: 0 }), 254);
  assert.equal(podRouteTable({ deviceNumber: 0, isPrimary: true }), 254);
  assert.equal(podRouteTable({ deviceNumber: 1 }), 2);
  assert.equal(podRouteTable({ deviceNumber: 2, isPrimary: false }), 3);
});

test('ruleSyncLines deletes extras and duplicates, adds what is missing, leaves others alone', () => {
  const want: IpRule = { priority: 1535, from: '10.0.0.6/32', table: 2 };
  const owned = (r: IpRule) => r.priority === 1535;
  const current: IpRule[] = [
    { priority: 0, table: 255 },
    { priority: 1535, from: '10.0.0.9/32', table: 2 },
    { priority: 512, to: '10.0.0.20/32', table: 254 },
  ];
  assert.deepEqual(ruleSyncLines(current, owned, [want]), [
    'rule del from 10.0.0.9/32 lookup 2 prio 1535',
    'rule add from 10.0.0.6/32 lookup 2 prio 1535',
  ]);
  assert.deepEqual(
    ruleSyncLines([want, { ...want, from: '10.0.0.6' }], owned, [want]),
    ['rule del from 10.0.0.6/32 lookup 2 prio 1535'],
    'a duplicate goes',
  );
  assert.deepEqual(ruleSyncLines([want], owned, [want]), [], 'converged: nothing to do');
  assert.equal(
    ruleLine('add', { priority: 1024, not: true, to: '10.0.0.0/16', table: 254 }),
    'rule add not to 10.0.0.0/16 lookup 254 prio 1024',
  );
});

test('node rules send only non-VPC traffic to main, and vanish with external SNAT', () => {
  const lines = nodeRules(['10.0.0.0/16', '100.64.0.0/16', '10.0.0.0/16'], false).map((r) => ruleLine('add', r));
  assert.deepEqual(lines, [
    'rule add to 10.0.0.0/16 goto 1026 prio 1024',
    'rule add to 100.64.0.0/16 goto 1026 prio 1024',
    'rule add lookup 254 prio 1025',
    'rule add nop prio 1026',
  ]);
  assert.deepEqual(nodeRules(['10.0.0.0/16'], true), []);
});

test('SNAT chain: RETURN per VPC/excluded CIDR, then SNAT with --random-fully, in one restore', () => {
  const text = snatChainRestore({
    nodeIp: '10.0.0.4',
    vpcCidrs: ['10.0.0.0/16'],
    excludeCidrs: ['192.168.0.0/16'],
    externalSnat: false,
  });
  const rules = text.split('\n').filter((l) => l.startsWith('-A'));
  assert.equal(rules.length, 3);
  assert.match(rules[0]!, /^-A AWS-SNAT-CHAIN-0 -d 10\.0\.0\.0\/16 .*-j RETURN$/);
  assert.match(rules[1]!, /^-A AWS-SNAT-CHAIN-0 -d 192\.168\.0\.0\/16 .*-j RETURN$/);
  assert.match(rules[2]!, /-j SNAT --to-source 10\.0\.0\.4 --random-fully$/);
  assert.ok(text.startsWith('*nat\n:AWS-SNAT-CHAIN-0 - [0:0]\n') && text.endsWith('COMMIT\n'));
});

test('SNAT port selection follows AWS_VPC_K8S_CNI_RANDOMIZESNAT: prng, hashrandom, none', () => {
  const last = (randomize: 'none' | 'hashrandom' | 'prng') =>
    snatChainRestore({ nodeIp: '10.0.0.4', vpcCidrs: [], excludeCidrs: [], externalSnat: false, randomize })
      .split('\n')
      .filter((l) => l.startsWith('-A'))
      .at(-1);
  assert.match(last('prng')!, /--to-source 10\.0\.0\.4 --random-fully$/);
  assert.match(last('hashrandom')!, /--to-source 10\.0\.0\.4 --random$/);
  assert.match(last('none')!, /--to-source 10\.0\.0\.4$/);
});

test('connmark rules: mark on the primary interface, restore on the pod veths; -S lines split back', () => {
  const [mark, restore] = connmarkRuleSpecs({ primaryIf: 'ens5', vethPrefix: 'eni', mark: 0x80 });
  assert.deepEqual(mark!.slice(0, 2), ['-i', 'ens5']);
  assert.deepEqual(mark!.slice(-4), ['-j', 'CONNMARK', '--set-xmark', '0x80/0x80']);
  assert.ok(mark!.includes('--limit-iface-in'));
  assert.deepEqual(restore!.slice(0, 2), ['-i', 'eni+']);
  assert.deepEqual(
    restore!.slice(-6),
    ['-j', 'CONNMARK', '--restore-mark', '--nfmask', '0x80', '--ctmask', '0x80'].slice(-6),
  );
  assert.deepEqual(splitRuleLine('-A PREROUTING -i eni+ -m comment --comment "AWS, primary ENI" -j CONNMARK'), [
    ...['-A', 'PREROUTING', '-i', 'eni+', '-m', 'comment', '--comment', 'AWS, primary ENI', '-j', 'CONNMARK'],
  ]);
  assert.deepEqual(splitRuleLine('-A X --comment "a \\"b\\"" -j Y'), ['-A', 'X', '--comment', 'a "b"', '-j', 'Y']);
});

test('plugin pod rules: to-pod always, from-pod only off the main table', () => {
  const plan: WiringPlan = {
    netns: '/x',
    ifName: 'eth0',
    hostVeth: 'eni1',
    hostMac: 'a',
    podMac: 'b',
    ipv4: '10.0.0.20',
    mtu: 9001,
    routeTableId: 2,
  };
  assert.deepEqual(policyRoutingLines(plan), [
    'rule add to 10.0.0.20/32 lookup main prio 512',
    'rule add from 10.0.0.20/32 lookup 2 prio 1536',
  ]);
  assert.deepEqual(policyRoutingLines({ ...plan, routeTableId: 254 }), [
    'rule add to 10.0.0.20/32 lookup main prio 512',
  ]);
  assert.deepEqual(policyRoutingLines({ ...plan, routeTableId: 0 }), ['rule add to 10.0.0.20/32 lookup main prio 512']);
});
