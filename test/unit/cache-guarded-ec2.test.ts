/**
 * CacheGuardedEc2 (cloud/cache-guarded-ec2.ts) over the in-memory EC2 (MemoryEc2) and
 * the real inventory cache writer on a temporary file: what a restart could serve from the
 * file while each call is in flight, and the order of cache writes and EC2 calls.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { Ec2Error, type Ec2Eni } from '../../ipamd/cloud/ec2-port.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { CacheGuardedEc2, type InventoryCacheSink } from '../../ipamd/cloud/cache-guarded-ec2.js';
import { InventoryCacheWriter, type InventoryFile } from '../../ipamd/cloud/inventory-cache.js';
import { MemoryEc2 } from '../../sim/memory-ec2.js';

const log = pino({ level: 'silent' });

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  const mem = new MemoryEc2();
  const subnet = mem.addSubnet('10.0.0.0/24');
  const inst = mem.launchInstance('m5.large', subnet.subnetId);
  const [primary] = await mem.describeEnis([inst.primaryEniId]);
  assert.ok(primary);
  const ds = new Datastore(0, 'ip');
  ds.upsertEni({
    eniId: primary.eniId,
    mac: primary.mac,
    deviceNumber: 0,
    subnetId: primary.subnetId,
    subnetCidr: subnet.cidr,
    primaryIp: primary.primaryIp,
    isPrimary: true,
    createdAtMs: 0,
    capacity: 9,
  });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-guard-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'eni-inventory.json');
  const writer = new InventoryCacheWriter({
    file,
    bootId: 'boot-1',
    instanceId: inst.instanceId,
    ds,
    managed: [primary],
    unmanaged: [],
    log,
  });
  /** What the guard asked of the cache, each with the EC2 calls made before it. */
  const asked: Array<{ what: string; callsBefore: string[] }> = [];
  const note = (what: string) => asked.push({ what, callsBefore: mem.calls.map((c) => c.action) });
  const sink: InventoryCacheSink = {
    write: (exclude, add) => {
      note(add ? 'write+add' : exclude ? 'write-exclude' : 'write');
      return writer.write(exclude, add);
    },
    noteDetach: (id) => {
      note('detach');
      return writer.noteDetach(id);
    },
    noteDeleted: (id) => {
      note('deleted');
      writer.noteDeleted(id);
    },
    noteDescribed: (enis) => {
      note(`described:${enis.map((e) => e.eniId).join(',')}`);
      writer.noteDescribed(enis);
    },
  };
  const ec2 = new CacheGuardedEc2(mem, sink);
  const listed = async (): Promise<string[]> => {
    const f = JSON.parse(await readFile(file, 'utf8')) as InventoryFile;
    return [...(f.managed.find((e) => e.eniId === primary.eniId)?.secondaryIps ?? [])].sort();
  };
  return { mem, ec2, ds, primary, inst, subnet, file, writer, asked, listed };
}

test('an unassign leaves the file without its IPs before EC2 is called, while the datastore still holds them', async (t) => {
  const { mem, ec2, ds, primary, writer, asked, listed } = await setup(t);
  const ips = (await mem.assignIps(primary.eniId, 3)).sort();
  ds.addIps(primary.eniId, ips);
  await writer.write();
  assert.deepEqual(await listed(), ips);
  let duringCall: string[] | undefined;
  mem.during('UnassignPrivateIpAddresses', async () => {
    duringCall = await listed();
  });
  await ec2.unassignIps(primary.eniId, [ips[0]!]);
  assert.deepEqual(duringCall, [ips[1], ips[2]], 'a restart during the call cannot serve the IP given back');
  assert.equal(ds.ipState(ips[0]!, 0), 'available', 'nothing but the exclusion left it out');
  const w = asked.find((a) => a.what === 'write-exclude');
  assert.ok(w && !w.callsBefore.includes('UnassignPrivateIpAddresses'), 'the write came before the call');
});

test('a /28 unassign leaves the prefix out of the file before EC2 is called', async (t) => {
  const { mem, ec2, ds, primary, file } = await setup(t);
  const [prefix] = await mem.assignPrefixes(primary.eniId, 1);
  ds.addPrefixes(primary.eniId, [prefix!]);
  let duringCall: string[] | undefined;
  mem.during('UnassignPrivateIpAddresses', async () => {
    const f = JSON.parse(await readFile(file, 'utf8')) as InventoryFile;
    duringCall = f.managed.find((e) => e.eniId === primary.eniId)?.ipv4Prefixes;
  });
  await ec2.unassignPrefixes(primary.eniId, [prefix!]);
  assert.deepEqual(duringCall, []);
});

test("an assign's answer is in the file when the caller gets it; a refused assign writes nothing", async (t) => {
  const { mem, ec2, ds, primary, asked, listed } = await setup(t);
  const ips = await ec2.assignIps(primary.eniId, 2);
  assert.deepEqual(ds.eniIps(primary.eniId), [], 'the datastore does not hold them yet');
  assert.deepEqual(await listed(), [...ips].sort());
  const prefixes = await ec2.assignPrefixes(primary.eniId, 1);
  assert.equal(prefixes.length, 1);
  const writes = asked.length;
  mem.failNext('AssignPrivateIpAddresses', { code: 'InsufficientFreeAddressesInSubnet' });
  await assert.rejects(
    ec2.assignIps(primary.eniId, 1),
    (e: unknown) => e instanceof Ec2Error && e.code === 'InsufficientFreeAddressesInSubnet',
  );
  assert.equal(asked.length, writes, 'no write for an assign EC2 refused');
});

test('a detach deletes the file before EC2 is called; writes resume once EC2 deleted the ENI', async (t) => {
  const { mem, ec2, ds, inst, subnet, file, writer, asked } = await setup(t);
  const eni = await mem.createEni({ subnetId: subnet.subnetId, description: 'x', tags: {}, secondaryCount: 0 });
  const attachmentId = await mem.attachEni(eni.eniId, inst.instanceId, 1);
  writer.noteDescribed(await mem.describeEnis([eni.eniId]));
  await writer.write();
  assert.ok(existsSync(file));
  let presentDuringCall: boolean | undefined;
  mem.during('DetachNetworkInterface', () => {
    presentDuringCall = existsSync(file);
  });
  await ec2.detachEni(attachmentId);
  assert.equal(presentDuringCall, false, 'a restart during the detach describes EC2');
  await writer.write();
  assert.equal(existsSync(file), false, 'kept deleted while the detached ENI exists');
  mem.failNext('DeleteNetworkInterface', { code: 'InvalidParameterValue' });
  await assert.rejects(ec2.deleteEni(eni.eniId));
  assert.ok(!asked.some((a) => a.what === 'deleted'), 'a failed delete is not reported to the cache');
  await ec2.deleteEni(eni.eniId);
  assert.deepEqual(asked.at(-1)?.callsBefore.at(-1), 'DeleteNetworkInterface', 'told after EC2 deleted it');
  await writer.write();
  assert.ok(existsSync(file), 'writes resume');
  assert.equal(ds.listEnis().length, 1);
});

test('a describe by instance feeds the cache its attached ENIs; other describes do not', async (t) => {
  const { mem, ec2, inst, subnet, primary, asked } = await setup(t);
  const loose = await mem.createEni({ subnetId: subnet.subnetId, description: 'x', tags: {}, secondaryCount: 0 });
  const all: Ec2Eni[] = await ec2.describeEnisByFilters({ 'subnet-id': [subnet.subnetId] });
  assert.equal(all.length, 2);
  assert.equal(asked.length, 0, 'a describe by subnet feeds nothing');
  await ec2.describeEnisByFilters({ 'attachment.instance-id': [inst.instanceId] });
  assert.deepEqual(
    asked.map((a) => a.what),
    [`described:${primary.eniId}`],
  );
  assert.ok(!asked[0]!.what.includes(loose.eniId));
});
