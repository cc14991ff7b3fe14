/**
 * netfacts/: the node networking facts shared by the plugin and ipamd. Rules and routes
 * are data: rendered to the exact `ip -batch` lines the kernel gets, and built back
 * from iproute2's JSON (never from the rendered text); tables and priorities in one place.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podHostRoute, routeFromJson, routeLine, routesTo } from '../../netfacts/ip-route.js';
import { podRules, ruleFromJson, ruleKey, ruleLine } from '../../netfacts/ip-rule.js';
import {
  eniRouteTable,
  FROM_POD_PRIORITY,
  MAIN_TABLE,
  TO_POD_PRIORITY,
  tableId,
  tableName,
} from '../../netfacts/routing.js';
import { hostRouteLines } from '../../cni-plugin/wiring.js';

test('tables and priorities: main is 254 by name and number, an ENI table is its device number + 1', () => {
  assert.equal(MAIN_TABLE, 254);
  assert.equal(tableName(254), 'main');
  assert.equal(tableName(3), '3');
  assert.equal(tableId('main'), 254);
  assert.equal(tableId('3'), 3);
  assert.equal(eniRouteTable(2), 3);
  assert.deepEqual([TO_POD_PRIORITY, FROM_POD_PRIORITY], [512, 1536]);
});

test('a rule rendered and read back from iproute2 JSON is the same rule', () => {
  const [to, from] = podRules('10.0.0.7', 3);
  assert.equal(ruleLine('add', to!, { tableNames: true }), 'rule add to 10.0.0.7/32 lookup main prio 512');
  assert.equal(ruleLine('add', to!), 'rule add to 10.0.0.7/32 lookup 254 prio 512');
  assert.equal(ruleLine('del', from!), 'rule del from 10.0.0.7/32 lookup 3 prio 1536');
  // What `ip -json rule show` prints for them.
  assert.equal(ruleKey(ruleFromJson({ priority: 512, src: 'all', dst: '10.0.0.7', table: 'main' })), ruleKey(to!));
  assert.equal(ruleKey(ruleFromJson({ priority: 1536, src: '10.0.0.7', table: '3' })), ruleKey(from!));
  assert.notEqual(ruleKey(ruleFromJson({ priority: 1536, src: '10.0.0.0', srclen: 24, table: '3' })), ruleKey(from!));
  assert.deepEqual(ruleFromJson({ priority: 1026, src: 'all', nop: null }), { priority: 1026, nop: true });
  assert.deepEqual(ruleFromJson({ priority: 1024, not: null, dst: '10.0.0.0', dstlen: 16, goto: 1026 }), {
    priority: 1024,
    not: true,
    to: '10.0.0.0/16',
    goto: 1026,
  });
  assert.ok(
    Number.isNaN(ruleFromJson({ src: 'all', table: 'main' }).priority),
    'a row without a priority is not a rule',
  );
});

test('the pod host route: rendered as wiring writes it, read back from iproute2 JSON', () => {
  const r = podHostRoute('10.0.0.7', 'eni0123');
  assert.equal(routeLine('add', r), 'route add 10.0.0.7/32 dev eni0123 scope link');
  assert.equal(
    hostRouteLines(
      {
        netns: '/x',
        ifName: 'eth0',
        hostVeth: 'eni0123',
        hostMac: 'm',
        podMac: 'p',
        mtu: 9001,
        ipv4: '10.0.0.7',
        routeTableId: 254,
      },
      'replace',
    )[0],
    'route replace 10.0.0.7/32 dev eni0123 scope link',
  );
  const read = routeFromJson({ dst: '10.0.0.7', dev: 'eni0123', scope: 'link', flags: [] } as never);
  assert.deepEqual(read, r);
  assert.deepEqual(routeFromJson({ dst: 'default', gateway: '10.0.0.1', dev: 'eth0' }), {
    dst: 'default',
    gateway: '10.0.0.1',
    dev: 'eth0',
    type: 'unicast',
  });
  assert.equal(routeFromJson({ type: 'blackhole', dst: '10.0.0.9' }).type, 'blackhole');
  assert.deepEqual(
    routesTo(
      [read, routeFromJson({ dst: '10.0.0.70', dev: 'x' }), routeFromJson({ dst: '10.0.0.0/24', dev: 'y' })],
      '10.0.0.7',
    ),
    [read],
  );
});
