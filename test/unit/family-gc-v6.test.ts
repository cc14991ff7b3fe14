/**
 * CNI GC in `ipv6` mode (ipamd/service/family-service.ts `gcV6`), by the IPv4 GC's rules
 * (service/gc.ts): a key the runtime did not list is released unless the kernel shows its
 * /128 or its egress IPv4 wired to a pod veth; an unreadable kernel or a held brake
 * releases nothing; a failed write puts everything back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Ipv6Allocations, type V6Allocation } from '../../ipamd/datastore/ipv6-allocations.js';
import { FamilyService } from '../../ipamd/service/family-service.js';
import { IpamService } from '../../ipamd/service/ipam-service.js';
import { controllerKit } from '../helpers/controller-kit.js';
import type { KernelEvidence } from '../../ipamd/restore/kernel-parse.js';

const log = pino({ level: 'silent' });
const PREFIX = '2600:1f14:abc:de00:7::/80';
const key = (i: number) => ({ networkName: 'aws-cni', containerID: `c${i}`, ifName: 'eth0' });

function node(n: number) {
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: true, cooldownMs: 30_000 });
  const allocs: V6Allocation[] = [];
  for (let i = 0; i < n; i++) allocs.push(v6.assign(key(i), undefined, 0, 0).allocation);
  const k = { wired: [] as string[], veths: undefined as number | undefined, fails: '', writeFails: false };
  let writes = 0;
  const svc = new FamilyService({
    mode: 'ipv6',
    v6,
    // ipv6 mode never touches the IPv4 request path.
    v4: undefined as unknown as IpamService,
    persistV6: async () => {
      if (k.writeFails) throw new Error('disk full');
      writes++;
    },
    log,
    now: () => 1000,
    kernel: {
      readKernel: async (): Promise<KernelEvidence> => {
        if (k.fails) throw new Error(k.fails);
        return {
          pods: new Map(k.wired.map((ip) => [ip, { ip, dev: `eni-${ip}`, rules: 0 }])),
          podVeths: k.veths ?? k.wired.length,
          rulesOnly: [],
        };
      },
    },
  });
  const held = () => v6.allocations().map((a) => a.containerID);
  return { v6, svc, allocs, k, held, writes: () => writes };
}

const listed = (...ids: number[]) => ids.map((i) => ({ containerID: `c${i}`, ifName: 'eth0' }));

test('ipv6 GC releases the unlisted /128 the kernel does not show; keeps the listed and the wired ones', async () => {
  const s = node(5);
  // c3 is not listed but its /128 is wired; c4 is not listed and only its egress /32 is wired.
  s.k.wired = [0, 1, 2, 3].map((i) => s.allocs[i]!.ipv6).concat([s.allocs[4]!.egressV4]);
  let r = await s.svc.gc('aws-cni', listed(0, 1, 2));
  assert.deepEqual(r, []);
  assert.deepEqual(s.held(), ['c0', 'c1', 'c2', 'c3', 'c4']);
  s.k.wired = [0, 1, 2].map((i) => s.allocs[i]!.ipv6);
  r = await s.svc.gc('aws-cni', listed(0, 1, 2));
  assert.deepEqual(
    r.map((x) => [x.key.containerID, x.v6?.ipv6, x.v6?.egressV4]),
    [3, 4].map((i) => [`c${i}`, s.allocs[i]!.ipv6, s.allocs[i]!.egressV4]),
  );
  assert.deepEqual(s.held(), ['c0', 'c1', 'c2']);
  assert.equal(s.writes(), 1, 'one durable write for the whole GC');
});

test('ipv6 GC: an unreadable kernel refuses the GC; nothing released', async () => {
  const s = node(3);
  s.k.fails = 'ip: exited 1';
  await assert.rejects(s.svc.gc('aws-cni', listed(0)), /GC refused: ip: exited 1/);
  assert.deepEqual(s.held(), ['c0', 'c1', 'c2']);
});

test('ipv6 GC: the release brake holds when only the runtime says most keys are gone', async () => {
  const s = node(12);
  s.k.veths = 0; // no pod veth at all: the kernel's silence does not count
  await assert.rejects(s.svc.gc('aws-cni', listed(0)), /GC refused/);
  assert.equal(s.held().length, 12);
});

test('ipv6 GC: a failed write puts every release back', async () => {
  const s = node(3);
  s.k.veths = 2;
  s.k.writeFails = true;
  await assert.rejects(s.svc.gc('aws-cni', listed(0)), /checkpoint write failed/);
  assert.deepEqual(s.held(), ['c0', 'c1', 'c2']);
});

test('dual GC: a key whose /128 alone the kernel shows wired keeps both halves; the others lose both', async (t) => {
  const n = controllerKit({ cooldownMs: 30_000, targets: { warmIpTarget: 2 } });
  t.after(() => n.pool.stop());
  const v4 = new IpamService({
    ds: n.ds,
    pool: n.pool,
    persist: async () => undefined,
    log,
    addWaitTimeoutMs: 5_000,
    now: n.vt.now,
  });
  const v6 = new Ipv6Allocations({ prefix: PREFIX, egressV4: false, cooldownMs: 30_000 });
  const wired: string[] = [];
  const svc = new FamilyService({
    mode: 'dual',
    v6,
    v4,
    persistV6: async () => undefined,
    log,
    now: n.vt.now,
    wallNow: n.vt.now,
    kernel: {
      readKernel: async () => ({
        pods: new Map(wired.map((ip) => [ip, { ip, dev: `eni-${ip}`, rules: 0 }])),
        podVeths: 1,
        rulesOnly: [],
      }),
    },
  });
  n.pool.start();
  await n.vt.tick();
  const a = [await svc.add(key(0)), await svc.add(key(1)), await svc.add(key(2))];
  wired.push(a[1]!.v6.ipv6);
  const r = await svc.gc('aws-cni', listed(0));
  assert.deepEqual(
    r.map((x) => [x.key.containerID, x.ipv4, x.v6?.ipv6]),
    [['c2', a[2]!.v4!.allocation.ipv4, a[2]!.v6.ipv6]],
  );
  assert.ok(n.ds.lookup(key(1)), 'the IPv4 half of the wired key is kept');
  assert.ok(v6.lookup(key(1)), 'its IPv6 half too');
  assert.equal(v6.lookup(key(2)), undefined);
});
