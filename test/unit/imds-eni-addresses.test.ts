/**
 * `ImdsClient.eniAddresses()` (ipamd/cloud/imds.ts), what the periodic ENI reconcile and
 * the wait for a new ENI read: against the simulated IMDS over HTTP, the same id, subnet
 * CIDR, IPv4s and prefixes as the full `enis()` read, in 1 + 4 requests per ENI instead of
 * 1 + 9 (IMDS is rate-limited per instance; a fleet's reconciles add up).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AssignPrivateIpAddressesCommand, AttachNetworkInterfaceCommand } from '@aws-sdk/client-ec2';
import { ImdsClient } from '../../ipamd/cloud/imds.js';
import { startSim } from '../helpers/sim-fixture.js';
import { createEni } from '../helpers/sim-eni.js';
import { LOADED_MS } from '../helpers/imds-timeout.js';

/** An HTTP proxy to `target` counting the GETs it forwards. */
async function countingProxy(t: { after(fn: () => Promise<void>): void }, target: string) {
  const seen = { gets: 0 };
  const s = http.createServer((req, res) => {
    if (req.method === 'GET') seen.gets++;
    const up = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => s.close(() => r())));
  return { seen, endpoint: `http://127.0.0.1:${(s.address() as AddressInfo).port}` };
}

test('eniAddresses reads what the reconcile uses, 1 + 4 requests per ENI, the same values as enis()', async (t) => {
  const { sim, ec2, subnet, inst } = await startSim(t);
  const eni = await createEni(ec2, subnet.subnetId, { SecondaryPrivateIpAddressCount: 2 });
  await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId!,
      InstanceId: inst.instanceId,
      DeviceIndex: 1,
    }),
  );
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni.NetworkInterfaceId!, Ipv4PrefixCount: 1 }),
  );
  const { seen, endpoint } = await countingProxy(t, sim.imdsEndpointFor(inst.instanceId).replace(/\/+$/, ''));
  const imds = new ImdsClient({ endpoint, timeoutMs: LOADED_MS });
  t.after(() => imds.close());

  const full = await imds.enis();
  assert.equal(full.length, 2);
  assert.equal(full[1]!.ipv4Prefixes.length, 1, 'the second ENI has a prefix');
  assert.equal(full[1]!.localIpv4s.length, 3);
  seen.gets = 0;
  const light = await imds.eniAddresses();
  assert.equal(seen.gets, 1 + 4 * 2, 'macs/ plus four paths per ENI');
  assert.deepEqual(
    light.sort((a, b) => a.eniId.localeCompare(b.eniId)),
    full
      .map((e) => ({
        mac: e.mac,
        eniId: e.eniId,
        subnetCidr: e.subnetCidr,
        localIpv4s: e.localIpv4s,
        ipv4Prefixes: e.ipv4Prefixes,
      }))
      .sort((a, b) => a.eniId.localeCompare(b.eniId)),
  );
});
