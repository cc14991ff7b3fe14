/**
 * IPv6 mode's start-up (ipamd/startup/ipv6-prefix.ts) on MemoryEc2: the primary ENI's /80
 * found in IMDS or in EC2, else assigned with one call; a subnet without an IPv6 block and
 * a non-Nitro type each refused in one line. And the IPv6 checkpoint file round trip.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { MemoryEc2 } from '../../sim/memory-ec2.js';
import { ensureIpv6Prefix, ipv6PrefixRefusal } from '../../ipamd/startup/ipv6-prefix.js';
import type { ImdsEniIpv6 } from '../../ipamd/cloud/imds.js';
import { Ipv6CheckpointWriter, ipv6JournalPath, readIpv6Checkpoint } from '../../ipamd/checkpoint/ipv6-file.js';
import { Ipv6Allocations } from '../../ipamd/datastore/ipv6-allocations.js';

const log = pino({ level: 'silent' });
const VPC6 = '2600:1f14:abc:de00::/56';

function world(ipv6Subnet: boolean) {
  const ec2 = new MemoryEc2({ seed: 3, vpcIpv6Cidrs: [VPC6] });
  const subnet = ec2.addSubnet('10.0.1.0/24', ipv6Subnet ? { ipv6Cidr: true } : {});
  const inst = ec2.launchInstance('m5.large', subnet.subnetId);
  return { ec2, subnetId: subnet.subnetId, eniId: inst.primaryEniId };
}

const imdsOf = (v: Partial<ImdsEniIpv6>) => ({
  eniIpv6: () =>
    Promise.resolve({ ipv6s: [], ipv6Prefixes: [], subnetIpv6Cidrs: [], vpcIpv6Cidrs: [], ...v } as ImdsEniIpv6),
});

test('no /80 anywhere: one AssignIpv6Addresses, then found in EC2 without a second call', async (t) => {
  const w = world(true);
  t.after(() => w.ec2.stop());
  const deps = { ec2: w.ec2, primaryMac: '02:00:00:00:00:01', primaryEniId: w.eniId, subnetId: w.subnetId, log };
  const imds = imdsOf({ subnetIpv6Cidrs: ['2600:1f14:abc:de00::/64'] });
  const first = await ensureIpv6Prefix({ ...deps, imds });
  assert.equal(first.assigned, true);
  assert.match(first.prefix, /^2600:1f14:abc:de00:[0-9a-f]+::\/80$/);
  assert.equal(w.ec2.count('AssignIpv6Addresses'), 1);
  const again = await ensureIpv6Prefix({ ...deps, imds });
  assert.deepEqual(again, { prefix: first.prefix, assigned: false });
  assert.equal(w.ec2.count('AssignIpv6Addresses'), 1, 'IMDS lagging: DescribeNetworkInterfaces found it');
});

test('a /80 in IMDS is used without any EC2 call', async (t) => {
  const w = world(true);
  t.after(() => w.ec2.stop());
  const r = await ensureIpv6Prefix({
    ec2: w.ec2,
    imds: imdsOf({ ipv6Prefixes: ['2600:1f14:abc:de00:7::/80'] }),
    primaryMac: 'm',
    primaryEniId: w.eniId,
    subnetId: w.subnetId,
    log,
  });
  assert.deepEqual(r, { prefix: '2600:1f14:abc:de00:7::/80', assigned: false });
  assert.equal(w.ec2.count(), 0);
});

test('a subnet without an IPv6 block: one line naming the subnet, no assignment tried', async (t) => {
  const w = world(false);
  t.after(() => w.ec2.stop());
  await assert.rejects(
    ensureIpv6Prefix({
      ec2: w.ec2,
      imds: imdsOf({}),
      primaryMac: 'm',
      primaryEniId: w.eniId,
      subnetId: w.subnetId,
      log,
    }),
    (e: Error) => {
      assert.ok(!e.message.includes('\n'));
      assert.match(
        e.message,
        new RegExp(`^ENABLE_IPv6=true is refused: subnet ${w.subnetId} .* has no IPv6 CIDR block`),
      );
      return true;
    },
  );
  assert.equal(w.ec2.count('AssignIpv6Addresses'), 0);
});

test('EC2 refusing the /80 is one line with its code', async (t) => {
  const w = world(false);
  t.after(() => w.ec2.stop());
  // IMDS claims a block EC2 does not have: EC2's own refusal is passed on.
  await assert.rejects(
    ensureIpv6Prefix({
      ec2: w.ec2,
      imds: imdsOf({ subnetIpv6Cidrs: ['2600:1f14:abc:de00::/64'] }),
      primaryMac: 'm',
      primaryEniId: w.eniId,
      subnetId: w.subnetId,
      log,
    }),
    /^Error: ENABLE_IPv6=true: EC2 refused a \/80 IPv6 prefix for the primary ENI eni-[0-9a-f]+: AssignIpv6Addresses: [A-Za-z.]+: /,
  );
});

test('a non-Nitro type is refused for IPv6 in one line; Nitro and bare metal pass', () => {
  const base = { instanceType: 't2.medium', maxEnis: 3, ipv4PerEni: 6, hypervisor: 'xen', bareMetal: false };
  assert.match(
    ipv6PrefixRefusal(base, 'ipv6')!,
    /^ENABLE_IPv6=true \(ipv6 mode\) is refused: instance type t2\.medium runs on the xen hypervisor/,
  );
  assert.equal(ipv6PrefixRefusal({ ...base, hypervisor: 'nitro' }, 'ipv6'), undefined);
  assert.equal(ipv6PrefixRefusal({ ...base, hypervisor: 'unknown', bareMetal: true }, 'dual'), undefined);
});

test('the IPv6 checkpoint: group-committed writes, read back, a corrupt file refused', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'v6cp-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'ipam.json.ipv6');
  assert.equal(await readIpv6Checkpoint(file), undefined, 'none yet');
  const v6 = new Ipv6Allocations({ prefix: '2600:1f14:abc:de00:7::/80', egressV4: true, cooldownMs: 1000 });
  const w = new Ipv6CheckpointWriter(file, 'boot-1', () => v6.state(0), false);
  const key = (n: number) => ({ networkName: 'n', containerID: `c${n}`, ifName: 'eth0' });
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => {
      v6.assign(key(i), undefined, 0, 5);
      return w.commit();
    }),
  );
  const back = (await readIpv6Checkpoint(file))!;
  assert.equal(back.bootId, 'boot-1');
  assert.equal(back.allocations.length, 20, 'the last commit holds every change made before it');
  const again = new Ipv6Allocations({ prefix: '2600:1f14:abc:de00:7::/80', egressV4: true, cooldownMs: 1000 });
  assert.equal(again.restore(back).restored.length, 20);

  // The first write was the snapshot; the later ones are journal lines, the highest seq wins.
  const journal = ipv6JournalPath(file);
  const snap = JSON.parse(await readFile(file, 'utf8')) as { seq: number; allocations: unknown[] };
  assert.equal(snap.seq, 1);
  assert.ok(snap.allocations.length < 20, 'the later writes went to the journal');
  const lines = (await readFile(journal, 'utf8')).trim().split('\n');
  assert.equal((JSON.parse(lines.at(-1)!) as { seq: number }).seq, back.seq);
  // A crash mid-append tears the last line: that write was never acknowledged, the one before is read.
  await appendFile(journal, '{"version":1,"seq":99');
  assert.equal((await readIpv6Checkpoint(file))!.seq, back.seq);
  // A restarted writer numbers on from the loaded seq; its first write is a snapshot and empties the journal.
  const w2 = new Ipv6CheckpointWriter(file, 'boot-2', () => v6.state(0), false, undefined, back.seq);
  v6.assign(key(20), undefined, 0, 5);
  await w2.commit();
  assert.equal(await readFile(journal, 'utf8'), '');
  const after = (await readIpv6Checkpoint(file))!;
  assert.deepEqual([after.seq, after.bootId, after.allocations.length], [back.seq! + 1, 'boot-2', 21]);
  // A bad line before the last is corruption, not a torn append: refused.
  await writeFile(journal, `{"version":1,\n${JSON.stringify({ ...after, seq: after.seq! + 1 })}\n`);
  await assert.rejects(readIpv6Checkpoint(file), /journal line 1 is not JSON/);
  await writeFile(journal, '');
  await writeFile(file, '{"version":1,');
  await assert.rejects(readIpv6Checkpoint(file), /^Error: IPv6 checkpoint .* is not JSON/);
  await writeFile(file, JSON.stringify({ ...JSON.parse(JSON.stringify(back)), version: 2 }));
  await assert.rejects(readIpv6Checkpoint(file), /IPv6 checkpoint .* is invalid/);
  assert.ok((await readFile(file, 'utf8')).length > 0);
});
