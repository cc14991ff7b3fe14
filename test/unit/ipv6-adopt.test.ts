/**
 * The start-up adoption of wired addresses no IPv6 allocation holds (ipamd/service/v6-adopt.ts,
 * datastore/ipv6-allocations.ts `adoptWired`): they are quarantined before the first ADD;
 * while the kernel is unreadable, ADDs fail (not-ready) and nothing is handed out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Ipv6Allocations } from '../../ipamd/datastore/ipv6-allocations.js';
import { FamilyService } from '../../ipamd/service/family-service.js';
import type { IpamService } from '../../ipamd/service/ipam-service.js';
import { IpamdFailure } from '../../ipamd/service/ipamd-failure.js';
import { WiredV6Adoption } from '../../ipamd/service/v6-adopt.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';

const log = pino({ level: 'silent' });
const PREFIX = '2600:1f14:abc:de00:7::/80';
const req = (i: number) => ({ networkName: 'aws-cni', containerID: `n${i}`, ifName: 'eth0', netns: '/x' });

function setup(wired: string[]) {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 0 });
  const k = { fails: '', reads: 0 };
  let writes = 0;
  const kernel = {
    readKernel: async (): Promise<KernelEvidence> => {
      k.reads++;
      if (k.fails) throw new Error(k.fails);
      return { pods: new Map(wired.map((ip) => [ip, { ip, dev: 'eni1', rules: 0 }])), podVeths: 1, rulesOnly: [] };
    },
  };
  const persistV6 = async () => void writes++;
  const adoption = new WiredV6Adoption({ v6, kernel, persistV6, log });
  const svc = new FamilyService({
    mode: 'ipv6',
    v6,
    v4: undefined as unknown as IpamService,
    persistV6,
    adoption,
    log,
    kernel,
  });
  return { v6, svc, adoption, k, writes: () => writes };
}

test('adoptWired quarantines unheld /128s in the /80 and egress IPv4s; skips held and foreign ones', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 0 });
  const held = v6.assign({ networkName: 'aws-cni', containerID: 'c', ifName: 'eth0' }, undefined, 0, 0).allocation;
  const q = v6.adoptWired([
    held.ipv6,
    held.egressV4,
    '2600:1f14:abc:de00:7:0:0:2',
    '2600:1f14:abc:de00:8::2',
    '169.254.172.9',
    '10.0.0.5',
  ]);
  assert.deepEqual(
    q.map((x) => x.address),
    ['2600:1f14:abc:de00:7::2', '169.254.172.9'],
  );
  assert.deepEqual(v6.adoptWired(['2600:1f14:abc:de00:7::2']), [], 'already quarantined');
  assert.equal(v6.state(0).quarantined.length, 2, 'checkpointed');
});

test('dual mode adopts no egress IPv4', () => {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: false, cooldownMs: 0 });
  assert.deepEqual(
    v6.adoptWired(['169.254.172.1', '2600:1f14:abc:de00:7::1']).map((x) => x.address),
    ['2600:1f14:abc:de00:7::1'],
  );
});

test('ADDs after adoption never get a wired address', async () => {
  const wired = ['2600:1f14:abc:de00:7::1', '2600:1f14:abc:de00:7::2', '169.254.172.1'];
  const s = setup(wired);
  for (let i = 0; i < 3; i++) {
    const r = await s.svc.add(req(i));
    assert.ok(!wired.includes(r.v6.ipv6), r.v6.ipv6);
    assert.ok(!wired.includes(r.v6.egressV4), r.v6.egressV4);
  }
  assert.equal(s.adoption.adopted, 3);
  assert.equal(s.k.reads, 1, 'the kernel is read once');
});

test('an unreadable kernel refuses ADDs (not-ready) until a read succeeds', async () => {
  const s = setup(['2600:1f14:abc:de00:7::1']);
  s.k.fails = 'ip: timed out after 5000 ms';
  await assert.rejects(s.svc.add(req(0)), (e: unknown) => e instanceof IpamdFailure && e.ipamdCause === 'not-ready');
  assert.equal(s.v6.allocations().length, 0, 'nothing handed out');
  assert.equal(s.adoption.ready, false);
  s.k.fails = '';
  const r = await s.svc.add(req(0));
  assert.equal(r.v6.ipv6, '2600:1f14:abc:de00:7::2', 'the wired ::1 skipped');
  assert.equal(s.adoption.ready, true);
  assert.equal(s.writes() >= 2, true, 'quarantine and assignment written');
});
