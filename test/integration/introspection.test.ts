/**
 * Introspection compatible with amazon-vpc-cni-k8s (docs/design.md#14-operability item 3) and the ADD/DEL log
 * lines with a run-time log level (item 6), against the real ipamd binary on the
 * simulated cloud over real HTTP and gRPC:
 * - `GET /` lists the paths; `/v1/enis` has upstream's shape (per network card, ENIs,
 *   CIDRs, addresses with pod metadata, container id blanked); `/v1/eni-configs` is
 *   upstream's 404 "Not Found" (no custom networking); the env-settings documents carry
 *   the upstream keys with the values in force; ours (`/v1/status`, `/v1/allocations`) stay;
 * - read-only: POST/PUT/DELETE/PATCH answer 405 and change nothing; HEAD works;
 * - every ADD/DEL log line carries pod namespace/name, container id, IP and ENI;
 * - SIGUSR2 cycles the log level (debug → trace → debug) and says so in the log.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import { ipamdLog } from '../helpers/restore-logs.js';

interface UpstreamAddress {
  Address: string;
  IPAMKey: { networkName: string; containerID: string; ifName: string };
  IPAMMetadata: { k8sPodNamespace?: string; k8sPodName?: string };
  AssignedTime: string;
  UnassignedTime: string;
}
interface UpstreamEni {
  ID: string;
  IsPrimary: boolean;
  IsTrunk: boolean;
  IsEFA: boolean;
  DeviceNumber: number;
  RouteTableID: number;
  SubnetID: string;
  IsExcludedForPodIPs: boolean;
  AvailableIPv4Cidrs: Record<
    string,
    {
      Cidr: { IP: string; Mask: string };
      IPAddresses: Record<string, UpstreamAddress>;
      IsPrefix: boolean;
      AddressFamily: string;
    }
  >;
  IPv6Cidrs: Record<string, unknown>;
}

test('introspection: upstream paths and shapes, read-only; ADD/DEL log lines; SIGUSR2 log level', async (t) => {
  const h = await createNode({
    ipamdEnv: {
      ENI_IPAM_INSTALL_CNI: 'false',
      WARM_IP_TARGET: '3',
      AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS: '172.16.0.0/12',
    },
  });
  t.after(() => h.close());
  const d = await h.startIpamd();
  const c = ipamdClient(h.socket);
  t.after(() => c.close());
  const base = `http://127.0.0.1:${d.introspectionPort}`;
  const get = async (p: string) => {
    const r = await fetch(base + p);
    return { status: r.status, type: r.headers.get('content-type') ?? '', text: await r.text() };
  };
  const added = await c.add('c1');
  assert.equal(added.success, true);

  const index = JSON.parse((await get('/')).text) as { AvailableCommands: string[] };
  assert.deepEqual([...index.AvailableCommands].sort(), [
    '/v1/allocations',
    '/v1/eni-configs',
    '/v1/enis',
    '/v1/ipamd-env-settings',
    '/v1/networkutils-env-settings',
    '/v1/stage-trace',
    '/v1/status',
  ]);

  const enis = JSON.parse((await get('/v1/enis')).text) as Record<
    string,
    { TotalIPs: number; AssignedIPs: number; ENIs: Record<string, UpstreamEni> }
  >;
  assert.deepEqual(Object.keys(enis), ['0'], 'one network card');
  const card = enis['0']!;
  assert.equal(card.AssignedIPs, 1);
  const status = (await d.status()) as { counts: { total: number }; enis: Array<{ eniId: string }> };
  assert.equal(card.TotalIPs, status.counts.total);
  const primary = card.ENIs[status.enis[0]!.eniId]!;
  assert.equal(primary.IsPrimary, true);
  assert.equal(primary.DeviceNumber, 0);
  assert.equal(primary.RouteTableID, 254);
  assert.equal(primary.SubnetID, h.subnetId);
  assert.deepEqual([primary.IsTrunk, primary.IsEFA, primary.IsExcludedForPodIPs], [false, false, false]);
  const cidr = primary.AvailableIPv4Cidrs[`${added.ipv4_addr}/32`]!;
  assert.deepEqual(cidr.Cidr, { IP: added.ipv4_addr, Mask: '/////w==' }, 'Go marshals net.IPNet: IP and a base64 mask');
  assert.equal(cidr.IsPrefix, false);
  assert.equal(cidr.AddressFamily, '4');
  const addr = cidr.IPAddresses[added.ipv4_addr]!;
  assert.deepEqual(
    addr.IPAMKey,
    { networkName: 'aws-cni', containerID: '', ifName: '' },
    'container id and ifName blanked, as upstream',
  );
  assert.deepEqual(addr.IPAMMetadata, { k8sPodNamespace: 'default', k8sPodName: 'pod-c1' });
  assert.ok(Date.now() - Date.parse(addr.AssignedTime) < 60_000);
  assert.equal(addr.UnassignedTime, '0001-01-01T00:00:00Z');
  const free = Object.values(primary.AvailableIPv4Cidrs).find((x) => x.Cidr.IP !== added.ipv4_addr)!;
  assert.equal(free.IPAddresses[free.Cidr.IP]!.AssignedTime, '0001-01-01T00:00:00Z');

  const eniConfigs = await get('/v1/eni-configs');
  assert.equal(eniConfigs.status, 404, 'no ENIConfig: custom networking is not supported');
  assert.equal(eniConfigs.text, 'Not Found\n');
  const ipamdEnv = JSON.parse((await get('/v1/ipamd-env-settings')).text) as Record<string, unknown>;
  assert.equal(ipamdEnv.WARM_IP_TARGET, 3);
  assert.equal(ipamdEnv.WARM_ENI_TARGET, 1);
  assert.equal(ipamdEnv.AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG, false);
  assert.equal(ipamdEnv.ENABLE_SUBNET_DISCOVERY, true, 'upstream default');
  const netEnv = JSON.parse((await get('/v1/networkutils-env-settings')).text) as Record<string, unknown>;
  assert.deepEqual(netEnv.AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS, ['172.16.0.0/12']);
  assert.equal(netEnv.AWS_VPC_K8S_CNI_EXTERNALSNAT, false);
  assert.equal(netEnv.AWS_VPC_ENI_MTU, 9001);
  assert.equal(netEnv.AWS_VPC_K8S_CNI_VETHPREFIX, 'eni');
  const allocs = JSON.parse((await get('/v1/allocations')).text) as Array<{ ipv4: string; containerID: string }>;
  assert.deepEqual(
    allocs.map((a) => [a.containerID, a.ipv4]),
    [['c1', added.ipv4_addr]],
  );
  assert.equal((await get('/v1/nothing')).status, 404);
  // The stage trace of the one ADD: each stage of the request path, and the checkpoint write that made it durable.
  const trace = JSON.parse((await get('/v1/stage-trace')).text) as Record<
    string,
    { count: number; p50: number; p99: number }
  >;
  for (const stage of ['add.decode', 'add.datastore', 'add.durable', 'add.encode', 'add.handler']) {
    assert.ok((trace[stage]?.count ?? 0) >= 1, `${stage} recorded: ${JSON.stringify(trace)}`); // datastore twice if the ADD waited for the pool
    assert.ok(trace[stage]!.p50 >= 0 && trace[stage]!.p50 <= trace[stage]!.p99);
  }
  assert.ok(trace['add.handler']!.p50 >= trace['add.durable']!.p50, 'the handler includes the durable wait');
  assert.ok(
    (trace['checkpoint.write.dsync']?.count ?? 0) +
      (trace['checkpoint.fdatasync']?.count ?? 0) +
      (trace['checkpoint.compact.fsync']?.count ?? 0) >=
      2,
    "the start-up write and the ADD's",
  );

  // Read-only: every other method is refused and changes nothing.
  for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
    for (const p of ['/', '/v1/enis', '/v1/allocations', '/v1/status']) {
      const r = await fetch(base + p, { method, body: method === 'DELETE' ? undefined : '{}' });
      assert.equal(r.status, 405, `${method} ${p}`);
      assert.equal(r.headers.get('allow'), 'GET, HEAD');
    }
  }
  const head = await fetch(`${base}/v1/status`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal((JSON.parse((await get('/v1/allocations')).text) as unknown[]).length, 1, 'still the one allocation');

  // ADD/DEL log lines: pod namespace/name, container id, IP, ENI.
  await c.del('c1', { reason: 'cni-del' });
  await c.del('never-added', { reason: 'cni-del' });
  const logFile = path.join(h.dir, 'ipamd.log');
  const lines = async (msg: string): Promise<Array<Record<string, unknown>>> =>
    (await ipamdLog(logFile, msg)) as unknown as Array<Record<string, unknown>>;
  const eniId = status.enis[0]!.eniId;
  const want = { podNamespace: 'default', podName: 'pod-c1', containerID: 'c1', ip: added.ipv4_addr, eniId };
  const assigned = await waitFor('the ADD log line', async () => (await lines('assigned IP'))[0]);
  assert.deepEqual(pick(assigned, Object.keys(want)), want);
  const released = await waitFor('the DEL log line', async () => (await lines('released IP'))[0]);
  assert.deepEqual(pick(released, Object.keys(want)), want);
  const nothing = await waitFor(
    'the DEL of a container holding nothing',
    async () => (await lines('DEL: container holds no IP'))[0],
  );
  assert.deepEqual(pick(nothing, ['containerID', 'ip', 'eniId']), {
    containerID: 'never-added',
    ip: null,
    eniId: null,
  });

  // SIGUSR2: debug → trace → debug (the harness runs ipamd at debug).
  process.kill(d.pid, 'SIGUSR2');
  await waitFor('log level trace', async () =>
    (await lines('log level changed')).some((l) => l.to === 'trace' && l.from === 'debug'),
  );
  process.kill(d.pid, 'SIGUSR2');
  await waitFor('log level back to debug', async () =>
    (await lines('log level changed')).some((l) => l.to === 'debug' && l.from === 'trace'),
  );
});

function pick(o: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, o[k]]));
}
