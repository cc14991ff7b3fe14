/**
 * Prefix delegation end to end (ENABLE_PREFIX_DELEGATION, WARM_PREFIX_TARGET): the real
 * ipamd binary against the simulated cloud through the real AWS SDK. Pods get addresses
 * out of /28 prefixes assigned with Ipv4PrefixCount; WARM_PREFIX_TARGET is honoured; a
 * prefix is unassigned only once all 16 of its addresses are free (after the cooldown
 * and the shrink delay); a Xen instance type is refused at start with one clear line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { DescribeNetworkInterfacesCommand, EC2Client } from '@aws-sdk/client-ec2';
import ipaddr from 'ipaddr.js';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { createLifecycleNode, listParam, waitUnfrozen } from '../helpers/lifecycle-node.js';
import { waitFor } from '../../kit/wait.js';

const MUTATING = ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'];

async function attachedEnis(h: NodeHarness) {
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: h.sim.ec2Endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
  try {
    const out = await ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [h.instanceId] }] }),
    );
    return (out.NetworkInterfaces ?? []).sort(
      (a, b) => (a.Attachment?.DeviceIndex ?? 0) - (b.Attachment?.DeviceIndex ?? 0),
    );
  } finally {
    ec2.destroy();
  }
}

/** The /28 prefixes EC2 shows on the instance's primary ENI. */
async function primaryPrefixes(h: NodeHarness): Promise<string[]> {
  const [eni] = await attachedEnis(h);
  return (eni?.Ipv4Prefixes ?? []).map((p) => p.Ipv4Prefix!).sort();
}

const inPrefix = (ip: string, prefix: string) => ipaddr.IPv4.parse(ip).match(ipaddr.IPv4.parseCIDR(prefix));

test('m5.large with WARM_PREFIX_TARGET=1: pods get IPs out of /28s; a prefix is released only when all 16 addresses are free', async (t) => {
  // A stand-in CRI keeps the pods live, so releases are not frozen (docs/design.md#4-restore-after-restart).
  const n = await createLifecycleNode({
    instanceType: 'm5.large',
    env: {
      ENABLE_PREFIX_DELEGATION: 'true',
      WARM_PREFIX_TARGET: '1',
      IP_COOLDOWN_PERIOD: '1s',
      ENI_IPAM_SHRINK_DELAY: '1s',
    },
  });
  t.after(() => n.close());
  const h = n.h;
  await n.start();
  await waitUnfrozen(n);
  await waitFor('one free /28 on the primary ENI', async () => (await n.status()).pool.freePrefixes === 1);
  assert.equal((await primaryPrefixes(h)).length, 1);

  // 17 pods: the first 16 fill one prefix, the 17th opens a second, and the pool keeps one more free.
  for (let i = 0; i < 17; i++) await n.add(`p${i}`);
  const pods = n.pods;
  assert.equal(new Set(pods.values()).size, 17, 'unique IPs');
  await waitFor('3 prefixes, one of them free', async () => {
    const s = await n.status();
    return s.pool.freePrefixes === 1 && s.counts.total === 48;
  });
  const prefixes = await primaryPrefixes(h);
  assert.equal(prefixes.length, 3);
  for (const [id, ip] of pods)
    assert.ok(
      prefixes.some((p) => inPrefix(ip, p)),
      `${id}'s ${ip} is inside a prefix EC2 shows`,
    );
  const byPrefix = (p: string) => [...pods].filter(([, ip]) => inPrefix(ip, p)).map(([id]) => id);
  const full = prefixes.find((p) => byPrefix(p).length === 16);
  assert.ok(full, 'the first 16 pods share one /28');

  // Every assign was a prefix assign; nothing was created, released or detached so far.
  // Three /28s in all, in as many calls as the pool steps batched them (ADDs within one step's
  // delay share its refill).
  const assigns = h.sim.calls.filter((x) => x.action === 'AssignPrivateIpAddresses');
  assert.equal(
    assigns.reduce((n, a) => n + Number(a.params.Ipv4PrefixCount ?? 0), 0),
    3,
    `prefixes assigned: ${JSON.stringify(assigns.map((a) => a.params.Ipv4PrefixCount))}`,
  );
  for (const a of assigns) {
    assert.ok(Number(a.params.Ipv4PrefixCount) >= 1, `Ipv4PrefixCount in ${JSON.stringify(a.params)}`);
    assert.equal(a.params.SecondaryPrivateIpAddressCount, undefined);
  }
  assert.equal(h.sim.countCalls(['CreateNetworkInterface', ...MUTATING]), 0);

  // DEL the 17th pod: its prefix becomes free only after IP_COOLDOWN_PERIOD, then surplus for ENI_IPAM_SHRINK_DELAY.
  const lone = prefixes.find((p) => byPrefix(p).length === 1)!;
  const delAt = Date.now();
  await n.del('p16');
  await waitFor('one prefix unassigned', async () => (await primaryPrefixes(h)).length === 2, 15_000);
  const unassigns = h.sim.calls.filter((x) => x.action === 'UnassignPrivateIpAddresses');
  assert.equal(unassigns.length, 1);
  assert.ok(
    unassigns[0]!.at - delAt >= 1900,
    `released ${unassigns[0]!.at - delAt} ms after the DEL: cooldown 1 s + shrink delay 1 s`,
  );
  assert.deepEqual(listParam(unassigns[0]!.params, 'PrivateIpAddress'), [], 'never single addresses of a prefix');
  const released = listParam(unassigns[0]!.params, 'Ipv4Prefix');
  assert.equal(released.length, 1, 'one prefix, unassigned as a prefix');
  assert.ok(released[0] === lone || byPrefix(released[0]!).length === 0, `released ${released[0]} held no pod`);
  for (const ip of pods.values()) assert.ok(!inPrefix(ip, released[0]!), `${ip} is still held by a pod`);

  // Half of the full prefix goes: 8 addresses still assigned there, so it is never released.
  for (const id of byPrefix(full!).slice(0, 8)) await n.del(id);
  // Not a wait: 3 s > cooldown 1 s + shrink delay 1 s, in which the half-used prefix must stay.
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(h.sim.countCalls('UnassignPrivateIpAddresses'), 1, 'a prefix with assigned addresses stays');
  assert.ok((await primaryPrefixes(h)).includes(full!));

  // The last 8 go: after cooldown + delay the surplus prefix is released (WARM_PREFIX_TARGET=1 keeps one).
  for (const id of [...pods.keys()]) await n.del(id);
  await waitFor('back to one free prefix', async () => (await primaryPrefixes(h)).length === 1, 15_000);
  assert.equal(h.sim.countCalls('UnassignPrivateIpAddresses'), 2);
  const s = await n.status();
  assert.equal(s.counts.total, 16);
  assert.equal(s.counts.assigned, 0);
  assert.equal(h.sim.countCalls(['CreateNetworkInterface', 'DetachNetworkInterface', 'DeleteNetworkInterface']), 0);
});

test('prefix mode with WARM_IP_TARGET/MINIMUM_IP_TARGET counts IPs rounded up to prefixes', async (t) => {
  const h = await createNode({
    instanceType: 'm5.large',
    ipamdEnv: {
      ENABLE_PREFIX_DELEGATION: 'true',
      WARM_IP_TARGET: '5',
      MINIMUM_IP_TARGET: '20',
      WARM_PREFIX_TARGET: '4',
    },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  await waitFor('32 addresses (MINIMUM_IP_TARGET=20 → 2 prefixes)', async () => (await d.status()).counts.total === 32);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  for (let i = 0; i < 28; i++) await c.add(`w${i}`); // 4 left < WARM_IP_TARGET=5 → one more prefix
  await waitFor('a third prefix', async () => (await d.status()).counts.total === 48);
  // Not a wait: 500 ms (two pool intervals) in which no fourth prefix may come.
  await new Promise((r) => setTimeout(r, 500));
  assert.equal((await primaryPrefixes(h)).length, 3, 'WARM_PREFIX_TARGET=4 is overridden by the IP targets');
});

test('default WARM_ENI_TARGET=1 in prefix mode: a new ENI is created with Ipv4PrefixCount', async (t) => {
  const h = await createNode({
    instanceType: 'm5.large',
    subnetCidr: '10.0.0.0/22',
    ipamdEnv: { ENABLE_PREFIX_DELEGATION: 'true' },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  await waitFor('the primary ENI holds 9 prefixes', async () => (await d.status()).counts.total === 144);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await c.add('first');
  await waitFor('a second ENI with 9 prefixes', async () => (await d.status()).counts.total === 288, 20_000);
  const creates = h.sim.calls.filter((x) => x.action === 'CreateNetworkInterface');
  assert.equal(creates.length, 1);
  assert.equal(creates[0]!.params.Ipv4PrefixCount, '9');
  assert.equal(creates[0]!.params.SecondaryPrivateIpAddressCount, undefined);
  const enis = await attachedEnis(h);
  assert.equal(enis.length, 2);
  assert.equal(enis[1]!.Ipv4Prefixes?.length, 9);
});

test('kill -9 and restart in prefix mode: prefixes come back from EC2 and every pod keeps its IP', async (t) => {
  const h = await createNode({
    instanceType: 'm5.large',
    ipamdEnv: { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' },
  });
  t.after(() => h.close());
  let d = await h.startIpamd();
  let c = ipamdClient(h.socket);
  const before = new Map<string, string>();
  for (let i = 0; i < 20; i++) before.set(`k${i}`, (await c.add(`k${i}`)).ipv4_addr);
  await waitFor('a free prefix again', async () => (await d.status()).pool.freePrefixes === 1);
  const prefixesBefore = await primaryPrefixes(h);
  c.close();
  await d.kill9();
  d = await h.startIpamd();
  c = ipamdClient(h.socket);
  t.after(() => c.close());
  const s = await d.status();
  assert.equal(s.counts.assigned, 20);
  assert.equal(s.counts.total, prefixesBefore.length * 16, 'every address of every prefix EC2 shows is known again');
  for (const [id, ip] of before) assert.equal((await c.add(id)).ipv4_addr, ip, `${id} keeps ${ip}`);
  const held = new Set(before.values());
  for (let i = 0; i < 10; i++) {
    const ip = (await c.add(`new${i}`)).ipv4_addr;
    assert.ok(!held.has(ip), `new ADD got ${ip}, which a live pod holds`);
    held.add(ip);
  }
  assert.equal(h.sim.countCalls(MUTATING), 0);
});

test('a Xen instance type (t2.medium) is refused at start with one clear line', async (t) => {
  const h = await createNode({ instanceType: 't2.medium' });
  t.after(() => h.close());
  const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...h.env,
      ENABLE_PREFIX_DELEGATION: 'true',
      WARM_PREFIX_TARGET: '1',
      ENI_IPAM_INSTALL_CNI: 'false',
      INTROSPECTION_BIND_ADDRESS: '127.0.0.1:0',
      DISABLE_METRICS: 'true',
      NODE_NO_WARNINGS: '1', // Node's own runtime warnings (e.g. the SDK's Node-version notice) are not ipamd's output
    };
    delete env.NODE_EXTRA_CA_CERTS;
    const p = spawn(process.execPath, [IPAMD_PATH], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), 20_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
  assert.equal(r.code, 1);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, got: ${r.stderr}`);
  assert.match(lines[0]!, /ENABLE_PREFIX_DELEGATION/);
  assert.match(lines[0]!, /t2\.medium/);
  assert.match(lines[0]!, /xen/);
  assert.match(lines[0]!, /Nitro/);
  assert.equal(
    h.sim.countCalls(['AssignPrivateIpAddresses', 'CreateNetworkInterface', ...MUTATING]),
    0,
    'refused before touching anything',
  );
});
