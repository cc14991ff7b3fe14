/**
 * Instance-type limits read at most once per start and cached across starts
 * (`ipamd/cloud/instance-limits.ts`), against the simulated EC2 through the real SDK:
 * a cache hit makes no call, a miss, a corrupt file or another type's file makes one
 * and (re)writes the file. Also: discovery's start-up reads retry inside the EC2
 * wrapper only, within their own bounded attempt budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pino } from 'pino';
import { buildNode } from '../../kit/node.js';
import { Ec2Api } from '../../ipamd/cloud/ec2.js';
import { loadInstanceTypeLimits, readCachedLimits } from '../../ipamd/cloud/instance-limits.js';
import { discoverNode } from '../../ipamd/startup/discover.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

const log = pino({ level: 'silent' });

async function setup(t: { after(fn: () => Promise<void> | void): void }) {
  ensureDummyAwsCredentials();
  const { sim, dir, close } = await buildNode({ instanceType: 'm5.xlarge', dirPrefix: 'eni-ipam-limits-' });
  const ec2 = new Ec2Api({ region: 'us-west-2', endpoint: sim.ec2Endpoint, backoff: { baseMs: 10, capMs: 20 } });
  t.after(async () => {
    ec2.close();
    await close();
  });
  return { sim, ec2, file: path.join(dir, 'instance-limits.json') };
}

test('limits: one DescribeInstanceTypes on a miss, none on a hit; corrupt or other-type files are ignored and rewritten', async (t) => {
  const { sim, ec2, file } = await setup(t);
  const calls = () => sim.countCalls('DescribeInstanceTypes');
  const first = await loadInstanceTypeLimits({ ec2, instanceType: 'm5.xlarge', cacheFile: file, log });
  assert.deepEqual([first.source, first.limits.maxEnis, first.limits.ipv4PerEni, calls()], ['ec2', 4, 15, 1]);
  const again = await loadInstanceTypeLimits({ ec2, instanceType: 'm5.xlarge', cacheFile: file, log });
  assert.deepEqual([again.source, again.limits, calls()], ['cache', first.limits, 1]);
  // Resized instance: the file names another type, so it is not used.
  const other = await loadInstanceTypeLimits({ ec2, instanceType: 'm5.large', cacheFile: file, log });
  assert.deepEqual([other.source, other.limits.maxEnis, calls()], ['ec2', 3, 2]);
  assert.equal((await readCachedLimits(file, 'm5.large'))?.ipv4PerEni, 10);
  await writeFile(file, '{"version":1,"instanceType":"m5.large","maxEnis":"lots"}');
  const corrupt = await loadInstanceTypeLimits({ ec2, instanceType: 'm5.large', cacheFile: file, log });
  assert.deepEqual([corrupt.source, calls()], ['ec2', 3]);
  assert.equal(JSON.parse(await readFile(file, 'utf8')).maxEnis, 3, 'rewritten');
});

test('discovery: throttled start-up reads retry inside the EC2 wrapper only, bounded by their attempt budget', async (t) => {
  const { sim, file } = await setup(t);
  // Every Describe* is refused 4 times, then answered: 5 attempts each, no second layer multiplying them.
  sim.faults.injectError({ action: 'DescribeInstanceTypes', code: 'RequestLimitExceeded', count: 4 });
  sim.faults.injectError({ action: 'DescribeNetworkInterfaces', code: 'RequestLimitExceeded', count: 4 });
  const backoff = { baseMs: 10, capMs: 40 };
  const inv = await discoverNode({
    imdsEndpoint: sim.imdsEndpoint,
    ec2Endpoint: sim.ec2Endpoint,
    log,
    limitsCacheFile: file,
    ec2Options: { backoff },
  });
  t.after(() => inv.ec2.close());
  assert.equal(inv.limits.maxEnis, 4);
  assert.equal(sim.countCalls('DescribeInstanceTypes'), 5);
  assert.equal(sim.countCalls('DescribeNetworkInterfaces'), 5);
  // A second start reads the limits from the file: no DescribeInstanceTypes at all.
  const inv2 = await discoverNode({
    imdsEndpoint: sim.imdsEndpoint,
    ec2Endpoint: sim.ec2Endpoint,
    log,
    limitsCacheFile: file,
    ec2Options: { backoff },
  });
  t.after(() => inv2.ec2.close());
  assert.equal(sim.countCalls('DescribeInstanceTypes'), 5);
  // More refusals than the budget: discovery fails (no retry layer on top), after exactly `ec2Attempts` attempts.
  sim.faults.injectError({ action: 'DescribeNetworkInterfaces', code: 'RequestLimitExceeded', count: 10 });
  const before = sim.countCalls('DescribeNetworkInterfaces');
  await assert.rejects(
    discoverNode({
      imdsEndpoint: sim.imdsEndpoint,
      ec2Endpoint: sim.ec2Endpoint,
      log,
      limitsCacheFile: file,
      ec2Options: { backoff },
      ec2Attempts: 3,
    }),
    /RequestLimitExceeded/,
  );
  assert.equal(sim.countCalls('DescribeNetworkInterfaces') - before, 3);
});
