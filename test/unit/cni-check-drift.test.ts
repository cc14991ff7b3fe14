/**
 * The pure parts of CHECK/DEL/GC in the plugin: prevResult parsing per result version,
 * the drift comparison over iproute2 JSON, the ip rule lines, chained ADD results and
 * version gates.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chainAddResult } from '../../cni-plugin/chain.js';
import { findDrift, type ExpectedAttachment, type NodeState, type PodState } from '../../cni-plugin/check-drift.js';
import {
  expectedPodRules,
  formatRule,
  podRuleDeleteLines,
  ruleDeleteLinesFor,
  ruleMatches,
} from '../../cni-plugin/pod-rules.js';
import { readPrevResult, type PrevAttachment } from '../../cni-plugin/prev-result.js';
import { encodeAddResult } from '../../cni-plugin/result.js';
import { versionAtLeast } from '../../cni-plugin/versions.js';

const NS = '/var/run/netns/p1';
const attachment = {
  hostVeth: { name: 'eni0123', mac: '02:00:00:00:00:01' },
  pod: { ifName: 'eth0', mac: '02:00:00:00:00:02', netns: NS },
  ipv4: '10.0.0.7',
  mtu: 9001,
};

test('readPrevResult reads every result version and chained results', () => {
  for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    const r = readPrevResult(JSON.parse(JSON.stringify(encodeAddResult(v, attachment))), 'eth0');
    assert.deepEqual(
      r,
      {
        ipv4: '10.0.0.7',
        prefixLen: 32,
        podIf: { name: 'eth0', mac: '02:00:00:00:00:02', sandbox: NS },
        hostIf: { name: 'eni0123', mac: '02:00:00:00:00:01' },
      },
      v,
    );
  }
  const prev = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'net1', sandbox: NS }],
    ips: [{ address: '192.168.9.9/24', interface: 0 }],
    routes: [],
    dns: {},
  };
  const chained = chainAddResult(encodeAddResult('1.0.0', attachment), prev) as {
    ips: Array<{ interface: number }>;
    interfaces: unknown[];
  };
  assert.equal(chained.interfaces.length, 3);
  assert.deepEqual(
    chained.ips.map((i) => i.interface),
    [0, 2],
  );
  assert.equal((readPrevResult(chained, 'eth0') as { ipv4: string }).ipv4, '10.0.0.7');
  assert.equal(readPrevResult(undefined, 'eth0'), 'prevResult is missing');
  assert.deepEqual(readPrevResult({ ips: [{ address: 'fd00::1/128' }] }, 'eth0'), {
    ipv4: '',
    prefixLen: 32,
    ipv6: 'fd00::1',
    ipv6PrefixLen: 128,
  });
  assert.match(String(readPrevResult({ ips: [] }, 'eth0')), /no IPv4 or IPv6 address for interface eth0/);
});

test('IPv6 and dual-stack results read back in every version (issue #31)', () => {
  const egress = {
    hostVeth: { name: 'eni4567', mac: '02:00:00:00:00:03' },
    pod: { ifName: 'v4if0', mac: '02:00:00:00:00:04' },
    ipv4: '169.254.172.9',
  };
  for (const v of ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']) {
    const v6 = encodeAddResult(v, { ...attachment, ipv4: '', ipv6: '2600:1f14::a', egress });
    assert.deepEqual(
      v6.ips.map((i) => [i.version, i.address, i.gateway, v6.interfaces[i.interface]!.name]),
      [
        [v.startsWith('0.') ? '6' : undefined, '2600:1f14::a/128', 'fe80::1', 'eth0'],
        [v.startsWith('0.') ? '4' : undefined, '169.254.172.9/32', '169.254.1.1', 'v4if0'],
      ],
      v,
    );
    assert.deepEqual(v6.routes, [{ dst: '0.0.0.0/0' }, { dst: '::/0' }]);
    const back = readPrevResult(JSON.parse(JSON.stringify(v6)), 'eth0') as PrevAttachment;
    assert.deepEqual([back.ipv4, back.ipv6, back.egressV4], ['', '2600:1f14::a', '169.254.172.9'], v);
    const dual = readPrevResult(
      JSON.parse(JSON.stringify(encodeAddResult(v, { ...attachment, ipv6: '2600:1f14::b' }))),
      'eth0',
    ) as PrevAttachment;
    assert.deepEqual([dual.ipv4, dual.ipv6, dual.egressV4], ['10.0.0.7', '2600:1f14::b', undefined], v);
  }
});

test('versionAtLeast gates CHECK at 0.4.0 and GC/STATUS at 1.1.0', () => {
  assert.equal(versionAtLeast('0.3.1', '0.4.0'), false);
  assert.equal(versionAtLeast('0.4.0', '0.4.0'), true);
  assert.equal(versionAtLeast('1.0.0', '1.1.0'), false);
  assert.equal(versionAtLeast('1.1.0', '1.1.0'), true);
  assert.equal(versionAtLeast('1.10.0', '1.1.0'), true);
});

test('pod rules are data: rendered, matched against iproute2 JSON and turned into deletes', () => {
  const [to, from] = expectedPodRules({ ipv4: '10.0.0.7', routeTableId: 3 });
  assert.deepEqual(to, { priority: 512, to: '10.0.0.7/32', table: 254 });
  assert.deepEqual(from, { priority: 1536, from: '10.0.0.7/32', table: 3 });
  assert.deepEqual(
    expectedPodRules({ ipv4: '10.0.0.7', routeTableId: 254 }),
    [to],
    'a pod on the primary ENI has only the to-rule',
  );
  assert.deepEqual(podRuleDeleteLines({ ipv4: '10.0.0.7', routeTableId: 3 }), [
    'rule del to 10.0.0.7/32 lookup main prio 512',
    'rule del from 10.0.0.7/32 lookup 3 prio 1536',
  ]);
  assert.equal(formatRule(from!), 'priority 1536 from 10.0.0.7 lookup 3');
  assert.equal(formatRule(to!), 'priority 512 to 10.0.0.7 lookup main');
  const shown = [
    { priority: 512, src: 'all', dst: '10.0.0.7', table: 'main' },
    { priority: 1536, src: '10.0.0.7', table: '3' },
    { priority: 32766, src: 'all', table: 'main' },
  ];
  assert.ok(
    ruleMatches(shown[0]!, to!) && ruleMatches(shown[1]!, from!) && !ruleMatches(shown[1]!, { ...from!, table: 4 }),
  );
  assert.ok(
    !ruleMatches(shown[1]!, { ...from!, priority: 1535 }) && !ruleMatches({ ...shown[1]!, srclen: 24 }, from!),
    'priority and prefix length count',
  );
  assert.deepEqual(ruleDeleteLinesFor(shown, '10.0.0.7'), [
    'rule del priority 512 to 10.0.0.7 lookup main',
    'rule del priority 1536 from 10.0.0.7 lookup 3',
  ]);
  assert.deepEqual(ruleDeleteLinesFor(shown, '10.0.0.8'), []);
});

test('findDrift names each missing piece', () => {
  const e: ExpectedAttachment = {
    netns: NS,
    ifName: 'eth0',
    ipv4: '10.0.0.7',
    podMac: '02:00:00:00:00:02',
    hostVeth: 'eni0123',
    hostMac: '02:00:00:00:00:01',
    rules: [{ from: '10.0.0.7/32', priority: 1536, table: 3 }],
  };
  const pod: PodState = {
    addrs: [
      {
        ifname: 'eth0',
        flags: ['UP'],
        address: '02:00:00:00:00:02',
        addr_info: [{ family: 'inet', local: '10.0.0.7', prefixlen: 32 }],
      },
    ],
    routes: [
      { dst: '169.254.1.1', dev: 'eth0', scope: 'link' },
      { dst: 'default', gateway: '169.254.1.1', dev: 'eth0' },
    ],
    neighs: [{ dst: '169.254.1.1', dev: 'eth0', lladdr: '02:00:00:00:00:01', state: ['PERMANENT'] }],
  };
  const node: NodeState = {
    links: [{ ifname: 'eni0123', flags: ['UP'], address: '02:00:00:00:00:01' }],
    routes: [{ dst: '10.0.0.7', dev: 'eni0123', scope: 'link' }],
    rules: [{ priority: 1536, src: '10.0.0.7', table: '3' }],
  };
  assert.deepEqual(findDrift(e, pod, node), []);
  const drop = <T extends object>(o: T, k: keyof T, keep: (x: never) => boolean) => ({
    ...o,
    [k]: (o[k] as never[]).filter(keep),
  });
  assert.deepEqual(
    findDrift(
      e,
      drop(pod, 'routes', (r: { dst: string }) => r.dst !== 'default'),
      node,
    ),
    [`route default via 169.254.1.1 dev eth0 missing in ${NS}`],
  );
  assert.deepEqual(
    findDrift(
      e,
      drop(pod, 'routes', (r: { dst: string }) => r.dst === 'default'),
      node,
    ),
    [`route 169.254.1.1 dev eth0 scope link missing in ${NS}`],
  );
  assert.deepEqual(findDrift(e, { ...pod, neighs: [] }, node), [
    `neighbour 169.254.1.1 lladdr 02:00:00:00:00:01 permanent missing on eth0 in ${NS}`,
  ]);
  assert.match(
    findDrift(e, { ...pod, neighs: [{ ...pod.neighs[0], state: ['STALE'] }] }, node).join(),
    /is not permanent \(STALE\)/,
  );
  assert.deepEqual(findDrift(e, { ...pod, addrs: [{ ...pod.addrs[0], addr_info: [] }] }, node), [
    `address 10.0.0.7/32 missing on eth0 in ${NS}`,
  ]);
  assert.deepEqual(findDrift(e, pod, { ...node, routes: [] }), [
    'host route 10.0.0.7/32 dev eni0123 missing on the node',
  ]);
  assert.deepEqual(findDrift(e, pod, { ...node, rules: [] }), [
    'ip rule priority 1536 from 10.0.0.7 lookup 3 missing on the node',
  ]);
  assert.deepEqual(findDrift(e, { ...pod, addrs: [] }, { ...node, links: [] }), [
    `interface eth0 missing in ${NS}`,
    'host veth eni0123 missing on the node',
  ]);
});
