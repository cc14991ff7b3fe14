/**
 * Pure parts of introspection and logging (docs/design.md#14-operability items 3 and 6): the `/v1/enis`
 * document in upstream's shape for secondary IPs and for /28 prefixes (a prefix's
 * addresses listed once handed out; masks base64 as Go marshals net.IPMask; cooldown in
 * UnassignedTime), and the SIGUSR2 log-level cycle.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { enisDocument, GO_ZERO_TIME } from '../../ipamd/observability/introspect-enis.js';
import { installLogLevelSignal, levelCycle, nextLevel } from '../../ipamd/log-level.js';
import { podRouteTable } from '../../netfacts/routing.js';

const eni = (id: string, dev: number) => ({
  eniId: id,
  mac: `02:00:00:00:00:0${dev}`,
  deviceNumber: dev,
  subnetId: 'subnet-1',
  subnetCidr: '10.0.0.0/16',
  primaryIp: `10.0.0.${10 + dev}`,
  isPrimary: dev === 0,
  createdAtMs: 0,
  capacity: 9,
});
const key = (id: string) => ({ networkName: 'aws-cni', containerID: id, ifName: 'eth0' });
type Doc = Record<
  string,
  {
    TotalIPs: number;
    AssignedIPs: number;
    ENIs: Record<
      string,
      {
        RouteTableID: number;
        DeviceNumber: number;
        AvailableIPv4Cidrs: Record<
          string,
          {
            Cidr: { IP: string; Mask: string };
            IsPrefix: boolean;
            IPAddresses: Record<
              string,
              {
                AssignedTime: string;
                UnassignedTime: string;
                IPAMKey: { containerID: string };
                IPAMMetadata: Record<string, string>;
              }
            >;
          }
        >;
      }
    >;
  }
>;

test('/v1/enis with /28 prefixes: one CIDR per prefix, its handed-out addresses, cooldown times', () => {
  const ds = new Datastore(30_000, 'prefix');
  ds.upsertEni(eni('eni-0', 0));
  ds.upsertEni(eni('eni-1', 1));
  ds.addPrefixes('eni-1', ['10.0.1.16/28']);
  const now = 1_700_000_000_000;
  const a = ds.assign(key('c1'), { namespace: 'ns', name: 'p1', uid: 'u1' }, now);
  const b = ds.assign(key('c2'), undefined, now);
  assert.equal(a.kind, 'assigned');
  assert.equal(b.kind, 'assigned');
  ds.unassign(key('c2'), now + 1000);
  const doc = enisDocument(ds, podRouteTable, now + 2000) as Doc;
  const card = doc['0']!;
  assert.equal(card.TotalIPs, 16);
  assert.equal(card.AssignedIPs, 1);
  const e1 = card.ENIs['eni-1']!;
  assert.equal(e1.RouteTableID, 2);
  assert.equal(card.ENIs['eni-0']!.RouteTableID, 254);
  const p = e1.AvailableIPv4Cidrs['10.0.1.16/28']!;
  assert.deepEqual(p.Cidr, { IP: '10.0.1.16', Mask: '////8A==' });
  assert.equal(p.IsPrefix, true);
  const ipA = (a as { allocation: { ipv4: string } }).allocation.ipv4;
  const ipB = (b as { allocation: { ipv4: string } }).allocation.ipv4;
  assert.deepEqual(Object.keys(p.IPAddresses).sort(), [ipA, ipB].sort(), 'only handed-out addresses are listed');
  assert.equal(p.IPAddresses[ipA]!.AssignedTime, new Date(now).toISOString());
  assert.deepEqual(p.IPAddresses[ipA]!.IPAMMetadata, { k8sPodNamespace: 'ns', k8sPodName: 'p1' });
  assert.equal(p.IPAddresses[ipA]!.IPAMKey.containerID, '');
  assert.equal(p.IPAddresses[ipB]!.AssignedTime, GO_ZERO_TIME);
  assert.equal(p.IPAddresses[ipB]!.UnassignedTime, new Date(now + 1000).toISOString(), 'cooling: when it was released');
});

test('SIGUSR2 cycles from the configured level to trace and back', () => {
  assert.deepEqual(levelCycle('info'), ['info', 'debug', 'trace']);
  assert.deepEqual(levelCycle('warn'), ['warn', 'info', 'debug', 'trace']);
  assert.equal(nextLevel('info', 'trace'), 'info');
  assert.equal(nextLevel('info', 'info'), 'debug');
  assert.throws(
    () => levelCycle('loud'),
    /unknown log level "loud": expected one of fatal, error, warn, info, debug, trace/,
  );
  const lines: Array<{ msg: string; from?: string; to?: string }> = [];
  const log = pino(
    { level: 'info' },
    {
      write: (s: string) => {
        lines.push(JSON.parse(s));
      },
    },
  );
  const proc = new EventEmitter() as unknown as NodeJS.Process;
  const remove = installLogLevelSignal(log, 'info', proc);
  const seen: string[] = [];
  for (let i = 0; i < 3; i++) {
    proc.emit('SIGUSR2');
    seen.push(log.level);
  }
  assert.deepEqual(seen, ['debug', 'trace', 'info']);
  assert.deepEqual(
    lines.filter((l) => l.msg === 'log level changed').map((l) => `${l.from}>${l.to}`),
    ['info>debug', 'debug>trace', 'trace>info'],
    'every change is logged (at warn)',
  );
  remove();
  proc.emit('SIGUSR2');
  assert.equal(log.level, 'info', 'removed');
});
