/**
 * The `eni-ipam-sim` bin (dist/sim/main.js): prints one JSON line with the endpoints,
 * serves the real SDK, exits 0 on SIGTERM; bad flags give one error line and exit 2.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DescribeInstancesCommand, DescribeSubnetsCommand, EC2Client } from '@aws-sdk/client-ec2';

process.removeAllListeners('warning');

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../sim/main.js');

function run(args: string[]): {
  p: ChildProcess;
  exit: Promise<{ code: number | null; stderr: string }>;
  firstLine: Promise<string>;
} {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const p = spawn(process.execPath, [MAIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => p.kill('SIGKILL'), 20_000);
  const exit = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    }),
  );
  const firstLine = new Promise<string>((resolve, reject) => {
    let buf = '';
    p.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const i = buf.indexOf('\n');
      if (i >= 0) resolve(buf.slice(0, i));
    });
    p.on('exit', () => reject(new Error(`exited before printing a line; stderr: ${stderr}`)));
  });
  return { p, exit, firstLine };
}

test('eni-ipam-sim prints its endpoints, serves the SDK, and exits 0 on SIGTERM', async (t) => {
  const r = run(['--instance-type', 'm5.large', '--subnet-cidr', '10.0.0.0/24']);
  t.after(() => {
    if (r.p.exitCode === null) r.p.kill('SIGKILL');
  });
  const info = JSON.parse(await r.firstLine) as {
    ec2Endpoint: string;
    imdsEndpoint: string;
    instanceId: string;
    subnetId: string;
  };
  assert.match(info.ec2Endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(info.imdsEndpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(info.instanceId, /^i-[0-9a-f]{17}$/);
  assert.match(info.subnetId, /^subnet-[0-9a-f]{17}$/);
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: info.ec2Endpoint,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
  try {
    const out = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [info.instanceId] }));
    const inst = out.Reservations![0]!.Instances![0]!;
    assert.equal(inst.InstanceType, 'm5.large');
    assert.equal(inst.SubnetId, info.subnetId);
  } finally {
    ec2.destroy();
  }
  r.p.kill('SIGTERM');
  const { code } = await r.exit;
  assert.equal(code, 0);
});

test('eni-ipam-sim rejects bad flags with one line and exit 2', async () => {
  for (const args of [
    ['--bogus'],
    ['--instance-type', 'x9.huge'],
    ['--subnet-cidr', '10.0.0/99'],
    ['--ec2-port', 'http'],
    ['--vpc-cidr', '10.0.0.0/16,100.64.0.0/99'],
    ['--subnet', '100.64.0.0/19'], // not inside the VPC
    ['--vpc-cidr', '10.0.0.0/16,100.64.0.0/16', '--subnet', '100.64.0.0/19:moon'],
    ['--vpc-ipv6-cidr', '2600:1f14:abc:de00::/64'], // a VPC's IPv6 block is a /56
    ['--vpc-ipv6-cidr', '2600:::de00::/56'],
  ]) {
    const r = run(args);
    r.firstLine.catch(() => undefined);
    const { code, stderr } = await r.exit;
    assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
    assert.equal(stderr.trim().split('\n').length, 1, `one line for ${args.join(' ')}: ${stderr}`);
    assert.match(stderr, /^eni-ipam-sim: /);
  }
});

test('eni-ipam-sim builds a custom-networking world: --vpc-cidr with a secondary block, tagged --subnet in another zone', async (t) => {
  const r = run([
    '--vpc-cidr',
    '10.0.0.0/16,100.64.0.0/16',
    '--subnet',
    '100.64.0.0/19:us-west-2a:kubernetes.io/role/cni=1',
    '--subnet',
    '100.64.32.0/19:us-west-2b:kubernetes.io/role/cni=1,team=net',
  ]);
  t.after(() => {
    if (r.p.exitCode === null) r.p.kill('SIGKILL');
  });
  const info = JSON.parse(await r.firstLine) as {
    ec2Endpoint: string;
    subnetId: string;
    vpcId: string;
    subnets: { subnetId: string; cidr: string; availabilityZone: string; tags: Record<string, string> }[];
  };
  assert.deepEqual(
    info.subnets.map((s) => [s.cidr, s.availabilityZone, s.tags]),
    [
      ['10.0.0.0/24', 'us-west-2a', {}],
      ['100.64.0.0/19', 'us-west-2a', { 'kubernetes.io/role/cni': '1' }],
      ['100.64.32.0/19', 'us-west-2b', { 'kubernetes.io/role/cni': '1', team: 'net' }],
    ],
  );
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: info.ec2Endpoint,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
  try {
    const out = await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [
          { Name: 'vpc-id', Values: [info.vpcId] },
          { Name: 'tag:kubernetes.io/role/cni', Values: ['1'] },
          { Name: 'availability-zone', Values: ['us-west-2b'] },
        ],
      }),
    );
    assert.deepEqual(
      out.Subnets!.map((s) => [s.CidrBlock, s.AvailableIpAddressCount]),
      [['100.64.32.0/19', 8192 - 5]],
    );
  } finally {
    ec2.destroy();
  }
  r.p.kill('SIGTERM');
  assert.equal((await r.exit).code, 0);
});

test('eni-ipam-sim --vpc-ipv6-cidr makes the node subnet dual-stack with a /64 of the VPC /56', async (t) => {
  const r = run(['--vpc-ipv6-cidr', '2600:1f14:abc:de00::/56']);
  t.after(() => {
    if (r.p.exitCode === null) r.p.kill('SIGKILL');
  });
  const info = JSON.parse(await r.firstLine) as { ec2Endpoint: string; subnetId: string };
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: info.ec2Endpoint,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
  try {
    const out = await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [info.subnetId] }));
    assert.deepEqual(
      out.Subnets!.map((s) => [s.CidrBlock, s.Ipv6CidrBlockAssociationSet?.map((a) => a.Ipv6CidrBlock)]),
      [['10.0.0.0/24', ['2600:1f14:abc:de00::/64']]],
    );
  } finally {
    ec2.destroy();
  }
  r.p.kill('SIGTERM');
  assert.equal((await r.exit).code, 0);
});
