/**
 * The ENI inventory cache (cloud/inventory-cache.ts) against the simulated cloud (real
 * Ec2Api over HTTP, real IMDS reads): an assign's answer is in the file before the caller
 * can hand it out, and a file that IMDS or the checkpoint outgrows is refused (the start
 * then describes EC2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { buildNode } from '../../kit/node.js';
import { Ec2Api, type Ec2Eni } from '../../ipamd/cloud/ec2.js';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { CacheGuardedEc2 } from '../../ipamd/cloud/cache-guarded-ec2.js';
import {
  InventoryCacheWriter,
  readInventoryCache,
  uncoveredAllocation,
  type InventoryFile,
} from '../../ipamd/cloud/inventory-cache.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

const log = pino({ level: 'silent' });
const BOOT = 'boot-1';

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  ensureDummyAwsCredentials();
  const { sim, dir, instanceId, close } = await buildNode({ dirPrefix: 'eni-ipam-inv-' });
  const inst = { instanceId };
  const ec2 = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, backoff: { baseMs: 10, capMs: 20 } });
  const imds = new ImdsClient({ endpoint: sim.imdsEndpointFor(inst.instanceId) });
  t.after(async () => {
    ec2.close();
    await close();
  });
  const [primary] = await ec2.describeEnisByFilters({ 'attachment.instance-id': [inst.instanceId] });
  assert.ok(primary);
  const ds = new Datastore(30_000, 'ip');
  ds.upsertEni({
    eniId: primary.eniId,
    mac: primary.mac,
    deviceNumber: 0,
    subnetId: primary.subnetId,
    subnetCidr: '10.0.0.0/24',
    primaryIp: primary.primaryIp,
    isPrimary: true,
    createdAtMs: Date.now(),
    capacity: 9,
  });
  const file = path.join(dir, 'eni-inventory.json');
  const writer = new InventoryCacheWriter({
    file,
    bootId: BOOT,
    instanceId: inst.instanceId,
    ds,
    managed: [primary],
    unmanaged: [],
    log,
  });
  const guarded = new CacheGuardedEc2(ec2, writer);
  const read = async () => JSON.parse(await readFile(file, 'utf8')) as InventoryFile;
  const check = async () =>
    readInventoryCache(file, { bootId: BOOT, instanceId: inst.instanceId, imdsEnis: await imds.enis() });
  return { sim, ec2: guarded, ds, primary, file, writer, read, check };
}

test('an assign answer is in the file (and IMDS agrees) before the caller gets it, so before any hand-out', async (t) => {
  const { ec2, ds, primary, read, check } = await setup(t);
  const ips = await ec2.assignIps(primary.eniId, 3);
  assert.equal(ips.length, 3);
  assert.deepEqual(ds.eniIps(primary.eniId), [], 'the datastore does not hold them yet');
  const listed = (await read()).managed.find((e) => e.eniId === primary.eniId)?.secondaryIps ?? [];
  assert.deepEqual([...listed].sort(), [...ips].sort(), 'the file lists the assigned IPs');
  const c = await check();
  assert.ok(c.ok, c.ok ? '' : c.reason);
  assert.equal(uncoveredAllocation(c.managed, ips), undefined, 'a checkpoint holding them is covered');
});

test('a file IMDS outgrows (an assign whose answer it missed) is refused; one IMDS lags behind is used', async (t) => {
  const { sim, ec2, ds, primary, writer, check } = await setup(t);
  ds.addIps(primary.eniId, await ec2.assignIps(primary.eniId, 2));
  // An assign whose answer ipamd never wrote (a crash between EC2's answer and the file): straight to EC2.
  const api = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint });
  t.after(() => api.close());
  const [lost] = await api.assignIps(primary.eniId, 1);
  const c = await check();
  assert.equal(c.ok, false, 'refused');
  assert.equal(c.ok ? '' : c.reason, `IMDS lists IP ${lost} on ENI ${primary.eniId} that the file does not`);
  ds.addIps(primary.eniId, [lost!]);
  await writer.write();
  assert.ok((await check()).ok, 'used once the file lists it');
  // IMDS behind EC2 (lists fewer than the file): the file is used.
  sim.faults.setImdsLag('assign', 60_000);
  ds.addIps(primary.eniId, await ec2.assignIps(primary.eniId, 2));
  const d = await check();
  assert.ok(d.ok, d.ok ? '' : d.reason);
});

test('uncoveredAllocation: secondary IPs and addresses inside a listed /28 are covered, others are not', () => {
  const eni = {
    eniId: 'eni-1',
    secondaryIps: ['10.0.0.5'],
    ipv4Prefixes: ['10.0.1.16/28'],
  } as unknown as Ec2Eni;
  assert.equal(uncoveredAllocation([eni], ['10.0.0.5', '10.0.1.16', '10.0.1.31']), undefined);
  assert.equal(uncoveredAllocation([eni], ['10.0.0.5', '10.0.1.32']), '10.0.1.32');
  assert.equal(uncoveredAllocation([eni], ['10.0.0.6']), '10.0.0.6');
  assert.equal(uncoveredAllocation([], []), undefined);
});
