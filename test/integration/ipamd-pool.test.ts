/**
 * ipamd end to end over its real gRPC socket, against the simulated cloud through the
 * real AWS SDK: warm-pool growth, ENI creation and tagging, limits, idempotency,
 * version skew, crash-restart from the checkpoint, and start-up validation.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { mkdir, readdir, readFile, rm, rmdir, stat } from 'node:fs/promises';
import { DescribeNetworkInterfacesCommand, EC2Client } from '@aws-sdk/client-ec2';
import * as grpc from '@grpc/grpc-js';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';
import { createNode, type NodeHarness } from '../../kit/node-harness.js';
import { ipamdClient, type GrpcError } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { createRounds } from '../helpers/create-rounds.js';

function ec2(h: NodeHarness): EC2Client {
  return new EC2Client({
    region: 'us-west-2',
    endpoint: h.sim.ec2Endpoint,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
}

async function attachedEnis(h: NodeHarness) {
  const out = await ec2(h).send(
    new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'attachment.instance-id', Values: [h.instanceId] }] }),
  );
  return (out.NetworkInterfaces ?? []).sort(
    (a, b) => (a.Attachment?.DeviceIndex ?? 0) - (b.Attachment?.DeviceIndex ?? 0),
  );
}

test('warm pool on a fresh m5.large: fills the primary ENI, then creates, tags and attaches a second ENI', async (t) => {
  const h = await createNode({ ipamdEnv: { CLUSTER_NAME: 'demo', ADDITIONAL_ENI_TAGS: '{"team":"net"}' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  await waitFor('9 available IPs on the primary ENI', async () => (await d.status()).counts.available >= 9);
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const r = await c.add('c1');
  assert.equal(r.success, true);
  assert.equal(r.device_number, 0);
  assert.equal(r.route_table_id, 254);
  assert.deepEqual(r.vpc_v4_cidrs, ['10.0.0.0/16']);
  // WARM_ENI_TARGET=1: one whole ENI's worth must stay available, so a second ENI comes.
  await waitFor('a second ENI with 9 IPs', async () => {
    const s = await d.status();
    return s.counts.enis === 2 && s.counts.available >= 9;
  });
  const enis = await attachedEnis(h);
  assert.equal(enis.length, 2);
  const second = enis[1]!;
  const tags = Object.fromEntries((second.TagSet ?? []).map((x) => [x.Key, x.Value]));
  assert.equal(tags['node.k8s.amazonaws.com/instance_id'], h.instanceId);
  assert.match(tags['node.k8s.amazonaws.com/createdAt'] ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  assert.equal(tags['cluster.k8s.amazonaws.com/name'], 'demo');
  assert.equal(tags.team, 'net');
  assert.equal(second.Description, `aws-K8S-${h.instanceId}`);
  assert.equal(second.Attachment?.DeviceIndex, 1);
  assert.equal(second.Attachment?.DeleteOnTermination, true);
  assert.equal((second.PrivateIpAddresses ?? []).filter((p) => !p.Primary).length, 9);
  // What ipamd handed out is really assigned to our instance in EC2.
  const onPrimary = (enis[0]!.PrivateIpAddresses ?? []).map((p) => p.PrivateIpAddress);
  assert.ok(onPrimary.includes(r.ipv4_addr));
  assert.equal(h.sim.countCalls(['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface']), 0);
});

test('ADD is idempotent per key, DEL releases into cooldown, DEL again and DEL unknown change nothing', async (t) => {
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '3' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const a1 = await c.add('a');
  const a2 = await c.add('a');
  assert.equal(a2.ipv4_addr, a1.ipv4_addr);
  const b = await c.add('b');
  assert.notEqual(b.ipv4_addr, a1.ipv4_addr);
  const other = await c.add('a', { if_name: 'eth1' });
  assert.notEqual(other.ipv4_addr, a1.ipv4_addr);
  const del1 = await c.del('a');
  assert.equal(del1.released, true);
  assert.equal(del1.ipv4_addr, a1.ipv4_addr);
  assert.equal((await c.del('a')).released, false);
  assert.equal((await c.del('never-added')).released, false);
  const s = await d.status();
  assert.equal(s.counts.assigned, 2, 'b and a/eth1 stay assigned');
  assert.equal(s.counts.cooling, 1);
  const fresh = await c.add('c');
  assert.notEqual(fresh.ipv4_addr, a1.ipv4_addr, 'a cooling IP is not handed out again at once');
});

test('version skew and missing keys are refused with clear gRPC codes', async (t) => {
  const h = await createNode();
  t.after(() => h.close());
  await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await assert.rejects(
    c.add('x', { api_version: 2 }),
    (e: GrpcError) => e.code === grpc.status.FAILED_PRECONDITION && /version 2/.test(e.details),
  );
  await assert.rejects(
    c.add('', {}),
    (e: GrpcError) => e.code === grpc.status.INVALID_ARGUMENT && /container_id/.test(e.details),
  );
});

test('t3.medium at its limits: 15 concurrent ADDs get unique IPs on 3 ENIs, the 16th fails saying why', async (t) => {
  const h = await createNode({ instanceType: 't3.medium', ipamdEnv: { ENI_IPAM_ADD_WAIT_TIMEOUT: '3s' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const replies = await Promise.all(Array.from({ length: 15 }, (_, i) => c.add(`p${i}`)));
  assert.equal(new Set(replies.map((r) => r.ipv4_addr)).size, 15);
  assert.deepEqual([...new Set(replies.map((r) => r.device_number))].sort(), [0, 1, 2]);
  await assert.rejects(
    c.add('p15'),
    (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED && /MAX_ENI|limit|ENIs/.test(e.details),
  );
  const s = await d.status();
  assert.equal(s.counts.assigned, 15);
  assert.equal((await attachedEnis(h)).length, 3);
});

test('kill -9 and restart: every pod keeps its IP and no new ADD receives one of them', async (t) => {
  // ADDs wait up to 60 s for a refill: at load average 20 a refill after the restart took over
  // the default 10 s; this test is about which IPs ADDs get, not how fast.
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '4', ENI_IPAM_ADD_WAIT_TIMEOUT: '60s' } });
  t.after(() => h.close());
  let d = await h.startIpamd();
  let c = ipamdClient(h.socket);
  const before = new Map<string, string>();
  for (let i = 0; i < 5; i++) before.set(`pod${i}`, (await c.add(`pod${i}`)).ipv4_addr);
  c.close();
  await d.kill9();
  d = await h.startIpamd();
  c = ipamdClient(h.socket);
  t.after(() => c.close());
  assert.equal((await d.status()).counts.assigned, 5);
  for (const [id, ip] of before) assert.equal((await c.add(id)).ipv4_addr, ip, `${id} keeps ${ip}`);
  const held = new Set(before.values());
  for (let i = 0; i < 12; i++) {
    const ip = (await c.add(`new${i}`)).ipv4_addr;
    assert.ok(!held.has(ip), `new ADD got ${ip}, which a live pod holds`);
    held.add(ip);
  }
  assert.equal(h.sim.countCalls(['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface']), 0);
});

test('SIGTERM finishes the in-flight ADD, then exits 0', async (t) => {
  const h = await createNode({ instanceType: 't3.medium', ipamdEnv: { WARM_IP_TARGET: '0', MINIMUM_IP_TARGET: '0' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  h.sim.faults.setLatency('AssignPrivateIpAddresses', 1500);
  const inflight = c.add('slow'); // pool empty: waits on a refill that takes 1.5 s
  await waitFor('the ADD to be waiting on the refill', async () => (await d.status()).waitingAdds === 1, 10_000, 10);
  const code = d.stop();
  const r = await inflight;
  assert.equal(r.success, true);
  assert.equal(await code, 0);
});

function runIpamdExpectingExit(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const e = { ...process.env, ...env };
    delete e.NODE_EXTRA_CA_CERTS;
    const p = spawn(process.execPath, [IPAMD_PATH], { env: e, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

test('an invalid env var stops ipamd with one line naming the variable and what it accepts', async () => {
  for (const [name, value] of [
    ['WARM_IP_TARGET', 'abc'],
    ['MAX_ENI', '-3'],
    ['AWS_VPC_K8S_CNI_LOGLEVEL', 'loud'],
    ['WARM_ENI_TARGET', '1.5'],
  ] as const) {
    const r = await runIpamdExpectingExit({ [name]: value, AWS_EC2_METADATA_SERVICE_ENDPOINT: 'http://127.0.0.1:9' });
    assert.equal(r.code, 1, `${name}=${value} must stop start-up`);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `one line, got: ${r.stderr}`);
    assert.match(lines[0]!, new RegExp(name));
    assert.match(lines[0]!, /expect|accept|one of|must/i);
  }
});

test('a checkpoint write failure rolls the assignment back and fails the RPC; DEL likewise keeps the IP held', async (t) => {
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '3' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const kept = await c.add('kept');
  await waitFor('a warm pool', async () => (await d.status()).counts.available >= 3);
  // Every durable write fails: the journal (appended through an fd ipamd keeps open) is made
  // immutable, so the kernel refuses the append with EPERM, and a directory where the snapshot
  // must be renamed to makes a compaction fail too.
  const journal = `${h.checkpoint}.journal`;
  await waitFor(
    'the journal written by the first ADD',
    async () => (await stat(journal).catch(() => undefined)) !== undefined || undefined,
  );
  execFileSync('chattr', ['+i', journal]);
  await rm(h.checkpoint, { force: true });
  await mkdir(h.checkpoint);
  // t.after hooks run in registration order (h.close() first), so the flag comes off here.
  try {
    // A failed durable write is transient for the runtime (CNI code 11 through the plugin):
    // UNAVAILABLE tagged [checkpoint] (cni-plugin/error-catalogue.ts).
    const checkpointFailed = (e: GrpcError): boolean =>
      e.code === grpc.status.UNAVAILABLE && /\[checkpoint\]/.test(e.details);
    await assert.rejects(c.add('doomed'), checkpointFailed);
    await assert.rejects(c.del('kept'), (e: GrpcError) => checkpointFailed(e) || /persist/.test(e.details));
    const s = await d.status();
    assert.equal(s.counts.assigned, 1, 'the failed ADD left nothing assigned, the failed DEL left kept assigned');
    const allocs = (await (await fetch(`http://127.0.0.1:${d.introspectionPort}/v1/allocations`)).json()) as Array<{
      containerID: string;
      ipv4: string;
    }>;
    assert.deepEqual(
      allocs.map((a) => [a.containerID, a.ipv4]),
      [['kept', kept.ipv4_addr]],
    );
  } finally {
    execFileSync('chattr', ['-i', journal]);
  }
  await rmdir(h.checkpoint);
  const ok = await c.add('doomed');
  assert.notEqual(ok.ipv4_addr, kept.ipv4_addr);
  assert.equal((await c.del('kept')).released, true);
});

test('once serving, ipamd installs the plugin and a conflist built from its settings (temp file + rename)', async (t) => {
  const h = await createNode({
    ipamdEnv: {
      POD_MTU: '1500',
      AWS_VPC_K8S_CNI_VETHPREFIX: 'pod',
      ENI_IPAM_NETWORK_NAME: 'eni-net',
      ENI_IPAM_CNI_IPAMD_WAIT: '2500ms',
    },
  });
  t.after(() => h.close());
  await h.startIpamd();
  const confDir = h.env.ENI_IPAM_CNI_CONF_DIR!;
  const binDir = h.env.ENI_IPAM_CNI_BIN_DIR!;
  assert.deepEqual(await readdir(confDir), ['05-eni-ipam.conflist'], 'no temp file left behind');
  const conf = JSON.parse(await readFile(`${confDir}/05-eni-ipam.conflist`, 'utf8'));
  assert.equal(conf.name, 'eni-net');
  assert.deepEqual(conf.plugins, [
    {
      type: 'eni-ipam',
      mtu: 1500,
      vethPrefix: 'pod',
      ipamdSocket: h.socket,
      execSocket: path.join(path.dirname(h.socket), 'cni-exec.sock'),
      ipamdWaitSeconds: 2.5,
      logFile: path.join(path.dirname(h.socket), 'plugin.log'), // the harness's own (kit/own-paths.ts), never the machine's
    },
  ]);
  // Only the native shim: the host needs no Node plugin (and no Node); no temp file left.
  assert.deepEqual(
    (await readdir(binDir)).filter((f) => f.startsWith('eni-ipam') || f.startsWith('.eni-ipam')).sort(),
    ['eni-ipam'],
  );
  assert.equal((await stat(`${binDir}/eni-ipam`)).mode & 0o777, 0o755);
  // The installed binary answers VERSION.
  const v = await new Promise<string>((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, CNI_COMMAND: 'VERSION' };
    delete env.NODE_EXTRA_CA_CERTS;
    const p = spawn(`${binDir}/eni-ipam`, [], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', () => resolve(out));
    p.stdin.end('{"cniVersion":"1.0.0"}');
  });
  assert.ok(JSON.parse(v).supportedVersions.includes('1.1.0'));
});

test('a full subnet fails waiting ADDs with the reason and pauses grow instead of hammering EC2', async (t) => {
  // /28: 16 − 5 reserved = 11 addresses; the instance takes 1, the primary ENI fills with 9.
  const h = await createNode({ subnetCidr: '10.0.0.0/28', ipamdEnv: { ENI_IPAM_ADD_WAIT_TIMEOUT: '1500ms' } });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('the primary ENI filled', async () => (await d.status()).counts.total === 9);
  for (let i = 0; i < 9; i++) await c.add(`p${i}`);
  await assert.rejects(
    c.add('p9'),
    (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED && /subnet has no free addresses/.test(e.details),
  );
  await assert.rejects(c.add('p10'), (e: GrpcError) => e.code === grpc.status.RESOURCE_EXHAUSTED);
  // One round asks for 9, 4, 2, then 1 secondary IPs (EC2 refuses a batch whole); a refused 1 pauses creations.
  const { rounds, calls } = createRounds(h.sim.calls);
  assert.ok(rounds >= 1 && rounds <= 2, `${rounds} refused creation rounds within the pause`);
  assert.ok(calls <= 2 * 4, `CreateNetworkInterface called ${calls} times within the pause`);
  assert.equal((await d.status()).counts.assigned, 9);
});
