/**
 * The simulated cloud's IMDSv2 server: the token flow, the metadata paths of docs/design.md#6-imds-paths-used
 * staying consistent with EC2 state (changed through the real SDK), the lag knob, and
 * the SDK default credential chain getting credentials from it.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { SimCloud, type Instance, type Subnet } from '../../sim/index.js';
import { waitFor } from '../../kit/wait.js';

process.removeAllListeners('warning'); // the SDK's Node-version notice is noise here

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

interface Env {
  sim: SimCloud;
  ec2: EC2Client;
  subnet: Subnet;
  inst: Instance;
  get: (p: string, base?: string) => Promise<string>;
}

async function setup(t: TestContext): Promise<Env> {
  const sim = new SimCloud();
  await sim.start();
  t.after(() => sim.stop());
  const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
  const inst = sim.launchInstance({ instanceType: 'm5.large', subnetId: subnet.subnetId });
  const ec2 = new EC2Client({
    region: 'us-west-2',
    endpoint: sim.ec2Endpoint,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    maxAttempts: 1,
  });
  t.after(() => ec2.destroy());
  const token = await (
    await fetch(`${sim.imdsEndpoint}/latest/api/token`, {
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60' },
    })
  ).text();
  const get = async (p: string, base = sim.imdsEndpoint): Promise<string> => {
    const r = await fetch(`${base}/latest/${p}`, { headers: { 'X-aws-ec2-metadata-token': token } });
    const body = await r.text();
    if (r.status !== 200) throw new Error(`GET ${p}: HTTP ${r.status}`);
    return body;
  };
  return { sim, ec2, subnet, inst, get };
}

test('IMDSv2 token flow: GET without a valid token is 401; the TTL is validated', async (t) => {
  const e = await setup(t);
  assert.equal((await fetch(`${e.sim.imdsEndpoint}/latest/meta-data/instance-id`)).status, 401);
  assert.equal(
    (
      await fetch(`${e.sim.imdsEndpoint}/latest/meta-data/instance-id`, {
        headers: { 'X-aws-ec2-metadata-token': 'forged' },
      })
    ).status,
    401,
  );
  assert.equal(
    (await fetch(`${e.sim.imdsEndpoint}/latest/api/token`, { method: 'PUT' })).status,
    400,
    'TTL header required',
  );
  assert.equal(
    (
      await fetch(`${e.sim.imdsEndpoint}/latest/api/token`, {
        method: 'PUT',
        headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '21601' },
      })
    ).status,
    400,
  );
  const r = await fetch(`${e.sim.imdsEndpoint}/latest/api/token`, {
    method: 'PUT',
    headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '1' },
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-aws-ec2-metadata-token-ttl-seconds'), '1');
  const token = await r.text();
  const ok = await fetch(`${e.sim.imdsEndpoint}/latest/meta-data/instance-id`, {
    headers: { 'X-aws-ec2-metadata-token': token },
  });
  assert.equal(ok.status, 200);
  assert.equal(await ok.text(), e.inst.instanceId);
  await new Promise((res) => setTimeout(res, 1100));
  assert.equal(
    (
      await fetch(`${e.sim.imdsEndpoint}/latest/meta-data/instance-id`, {
        headers: { 'X-aws-ec2-metadata-token': token },
      })
    ).status,
    401,
    'expired token',
  );
  assert.equal(await e.get('meta-data/instance-id'), e.inst.instanceId);
  await assert.rejects(e.get('meta-data/no-such-thing'), /HTTP 404/);
});

test('instance paths and the identity document', async (t) => {
  const e = await setup(t);
  const primary = e.sim.state.enis.get(e.inst.primaryEniId)!;
  assert.equal(await e.get('meta-data/instance-type'), 'm5.large');
  assert.equal(await e.get('meta-data/local-ipv4'), e.inst.privateIpAddress);
  assert.equal(await e.get('meta-data/mac'), primary.macAddress);
  assert.equal(await e.get('meta-data/placement/availability-zone'), 'us-west-2a');
  const doc = JSON.parse(await e.get('dynamic/instance-identity/document')) as Record<string, string>;
  assert.equal(doc.region, 'us-west-2');
  assert.equal(doc.instanceId, e.inst.instanceId);
  assert.equal(doc.instanceType, 'm5.large');
  assert.equal(doc.availabilityZone, 'us-west-2a');
  assert.equal(doc.privateIp, e.inst.privateIpAddress);
  assert.match(doc.accountId!, /^\d{12}$/);
  const m = `meta-data/network/interfaces/macs/${primary.macAddress}/`;
  assert.equal(await e.get('meta-data/network/interfaces/macs/'), `${primary.macAddress}/`);
  assert.equal(await e.get(m + 'interface-id'), e.inst.primaryEniId);
  assert.equal(await e.get(m + 'device-number'), '0');
  assert.equal(await e.get(m + 'subnet-id'), e.subnet.subnetId);
  assert.equal(await e.get(m + 'vpc-id'), e.sim.state.vpcId);
  assert.equal(await e.get(m + 'subnet-ipv4-cidr-block'), '10.0.0.0/24');
  assert.equal(await e.get(m + 'vpc-ipv4-cidr-blocks'), '10.0.0.0/16');
  assert.equal(await e.get(m + 'security-group-ids'), primary.securityGroupIds.join('\n'));
  assert.equal(await e.get(m + 'local-ipv4s'), e.inst.privateIpAddress);
  await assert.rejects(e.get(m + 'ipv4-prefix'), /HTTP 404/, 'no prefixes yet');
});

test('network paths follow EC2 state: attach, assign (primary first), prefixes, unassign, detach; per-instance endpoint', async (t) => {
  const e = await setup(t);
  const eni = (await e.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: e.subnet.subnetId }))).NetworkInterface!;
  const mac = eni.MacAddress!;
  assert.doesNotMatch(
    await e.get('meta-data/network/interfaces/macs/'),
    new RegExp(mac),
    'an unattached ENI is not listed',
  );
  const att = await e.ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId,
      InstanceId: e.inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  const primaryMac = e.sim.state.enis.get(e.inst.primaryEniId)!.macAddress;
  assert.deepEqual((await e.get('meta-data/network/interfaces/macs/')).split('\n'), [`${primaryMac}/`, `${mac}/`]);
  const m = `meta-data/network/interfaces/macs/${mac}/`;
  assert.equal(await e.get(m + 'device-number'), '1');
  assert.equal(await e.get(m + 'interface-id'), eni.NetworkInterfaceId);
  const r = await e.ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId,
      SecondaryPrivateIpAddressCount: 3,
    }),
  );
  const ips = r.AssignedPrivateIpAddresses!.map((x) => x.PrivateIpAddress!);
  assert.deepEqual((await e.get(m + 'local-ipv4s')).split('\n'), [eni.PrivateIpAddress, ...ips]);
  const px = await e.ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: e.inst.primaryEniId, Ipv4PrefixCount: 2 }),
  );
  assert.deepEqual(
    (await e.get(`meta-data/network/interfaces/macs/${primaryMac}/ipv4-prefix`)).split('\n'),
    px.AssignedIpv4Prefixes!.map((p) => p.Ipv4Prefix),
  );
  await e.ec2.send(
    new UnassignPrivateIpAddressesCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId,
      PrivateIpAddresses: [ips[0]!],
    }),
  );
  assert.deepEqual((await e.get(m + 'local-ipv4s')).split('\n'), [eni.PrivateIpAddress, ips[1], ips[2]]);

  const other = e.sim.launchInstance({ instanceType: 't3.medium', subnetId: e.subnet.subnetId });
  const base = e.sim.imdsEndpointFor(other.instanceId);
  assert.equal(await e.get('meta-data/instance-id', base), other.instanceId);
  assert.equal(await e.get('meta-data/instance-type', base), 't3.medium');
  assert.equal(await e.get('meta-data/local-ipv4', base), other.privateIpAddress);
  assert.equal(
    await e.get('meta-data/instance-id'),
    e.inst.instanceId,
    'the default endpoint still serves the first instance',
  );

  await e.ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId }));
  assert.equal(await e.get('meta-data/network/interfaces/macs/'), `${primaryMac}/`);
  await assert.rejects(e.get(m + 'local-ipv4s'), /HTTP 404/);
});

test('IMDS lag: after assign/attach IMDS shows the old view for the configured time, then catches up', async (t) => {
  const e = await setup(t);
  await fetch(`${e.sim.ec2Endpoint}/_sim/faults`, {
    method: 'POST',
    body: JSON.stringify({ imdsLagMs: { assign: 400, attach: 400 } }),
  });
  const primaryMac = e.sim.state.enis.get(e.inst.primaryEniId)!.macAddress;
  const ipv4s = `meta-data/network/interfaces/macs/${primaryMac}/local-ipv4s`;
  const t0 = Date.now();
  const r = await e.ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: e.inst.primaryEniId, SecondaryPrivateIpAddressCount: 2 }),
  );
  assert.equal(await e.get(ipv4s), e.inst.privateIpAddress, 'still the old view');
  assert.equal(e.sim.state.enis.get(e.inst.primaryEniId)!.secondaryIps.length, 2, 'EC2 already has the change');
  const want = [e.inst.privateIpAddress, ...r.AssignedPrivateIpAddresses!.map((x) => x.PrivateIpAddress)].join('\n');
  await waitFor('IMDS to show the assigned IPs', async () => (await e.get(ipv4s)) === want, 5000, 20);
  assert.ok(Date.now() - t0 >= 380, `caught up after ${Date.now() - t0} ms`);

  const eni = (await e.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: e.subnet.subnetId }))).NetworkInterface!;
  await e.ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId,
      InstanceId: e.inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  assert.equal(await e.get('meta-data/network/interfaces/macs/'), `${primaryMac}/`, 'new ENI not visible yet');
  await waitFor(
    'IMDS to list the new ENI',
    async () => (await e.get('meta-data/network/interfaces/macs/')).includes(eni.MacAddress!),
    5000,
    20,
  );

  e.sim.faults.setImdsLag('unassign', 0);
  await e.ec2.send(
    new UnassignPrivateIpAddressesCommand({
      NetworkInterfaceId: e.inst.primaryEniId,
      PrivateIpAddresses: [r.AssignedPrivateIpAddresses![0]!.PrivateIpAddress!],
    }),
  );
  assert.equal((await e.get(ipv4s)).split('\n').length, 2, 'no lag configured for unassign: immediate');
});

test('the SDK default credential chain gets credentials from the simulated IMDS (no keys in the environment)', async (t) => {
  const e = await setup(t);
  const creds = await e.get('meta-data/iam/security-credentials/');
  const doc = JSON.parse(await e.get(`meta-data/iam/security-credentials/${creds.trim()}`)) as Record<string, string>;
  assert.equal(doc.Code, 'Success');
  assert.ok(doc.AccessKeyId && doc.SecretAccessKey && doc.Token);
  const hours = (Date.parse(doc.Expiration!) - Date.now()) / 3600_000;
  assert.ok(hours > 5.5 && hours <= 6.01, `expires in ${hours} h`);

  const home = await mkdtemp(path.join(os.tmpdir(), 'sim-imds-home-'));
  t.after(() => rm(home, { recursive: true, force: true }));
  const script = `
    import { EC2Client, DescribeSubnetsCommand } from '@aws-sdk/client-ec2';
    const c = new EC2Client({ region: 'us-west-2', endpoint: process.env.SIM_EC2, maxAttempts: 1 });
    const out = await c.send(new DescribeSubnetsCommand({}));
    const k = await c.config.credentials();
    process.stdout.write(JSON.stringify({ subnets: out.Subnets.length, accessKeyId: k.accessKeyId, hasToken: !!k.sessionToken, expiration: k.expiration }));
  `;
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    SIM_EC2: e.sim.ec2Endpoint,
    AWS_EC2_METADATA_SERVICE_ENDPOINT: e.sim.imdsEndpoint,
    AWS_CONFIG_FILE: path.join(home, 'none'),
    AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'none'),
  };
  const res = await new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const p = spawn(process.execPath, ['--no-warnings', '--input-type=module', '-e', script], {
      cwd: REPO,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const timer = setTimeout(() => p.kill('SIGKILL'), 30_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
  assert.equal(res.code, 0, res.err);
  const got = JSON.parse(res.out) as { subnets: number; accessKeyId: string; hasToken: boolean };
  assert.equal(got.subnets, 1);
  assert.match(got.accessKeyId, /^ASIASIM/);
  assert.equal(got.hasToken, true);
  assert.equal(e.sim.countCalls('DescribeSubnets'), 1);
});
