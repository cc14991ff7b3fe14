/**
 * The real bundled CNI plugin (dist/cni-plugin/eni-ipam.cjs) against a stand-in ipamd
 * (grpc-js + proto-loader over proto/ipam.proto, see helpers/cni-backend-standin.ts), run
 * inside a "node" network namespace so nothing on the real host changes, wiring pod
 * namespaces of both shapes (`/var/run/netns/<name>` and `/proc/<pid>/ns/net`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, createProcNetns, tcpSendFrom, type Netns } from '../../kit/netns.js';
import { startCniBackendStandIn, type CniBackendStandIn } from '../../kit/cni-backend-standin.js';
import { waitFor } from '../../kit/wait.js';

/** `ip <args>` inside the netns at `ns` (entered by path). execFile, not demo's `ipIn`: its
 * unguarded stdin write can raise an uncaught EPIPE when `ip` exits first. */
const ipIn = async (ns: string, args: string[]): Promise<string> =>
  (await promisify(execFile)('nsenter', [`--net=${ns}`, 'ip', ...args])).stdout;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const ipj = async (ns: string, args: string[]): Promise<any[]> => JSON.parse((await ipIn(ns, ['-j', ...args])) || '[]');
const NODE_ADDR = '10.0.0.10';
const newId = () => randomBytes(32).toString('hex');

interface Env {
  node: Netns;
  standin: CniBackendStandIn;
  config: Record<string, unknown>;
  call(c: Omit<CniCall, 'config' | 'prefix'> & { config?: unknown }): ReturnType<typeof execPlugin>;
}

/** Node netns + standin + a plugin runner inside the node netns; all removed by t.after. */
async function setup(
  t: { after(fn: () => unknown): void },
  tag: string,
  extraConfig: Record<string, unknown> = {},
): Promise<Env> {
  const standin = await startCniBackendStandIn();
  t.after(() => standin.close());
  const node = await createNamedNetns(`eni-cp-${tag}-${process.pid}`);
  t.after(() => node.remove());
  const config = {
    cniVersion: '1.0.0',
    name: 'aws-cni',
    type: 'eni-ipam',
    ipamdSocket: standin.socket,
    mtu: 9001,
    ...extraConfig,
  };
  return {
    node,
    standin,
    config,
    call: (c) => execPlugin({ ...c, config: c.config ?? config, prefix: ['nsenter', `--net=${node.path}`] }),
  };
}

test('ADD/DEL in real namespaces, both netns shapes, with traffic', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eni-cp-log-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const logFile = path.join(dir, 'plugin.log');
  const e = await setup(t, 'main', { logFile });
  await ipIn(e.node.path, ['addr', 'add', `${NODE_ADDR}/32`, 'dev', 'lo']);
  const server = spawn(
    'nsenter',
    [
      `--net=${e.node.path}`,
      process.execPath,
      '-e',
      `require('net').createServer(s=>s.once('data',d=>{console.log(d.toString().trim()+' '+s.remoteAddress);s.end('ok\\n')})).listen(8080,'${NODE_ADDR}',()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  let seen = '';
  server.stdout!.on('data', (b: Buffer) => (seen += b.toString()));
  await waitFor('the node TCP server', () => seen.includes('listening'));

  const pods: Netns[] = [];
  t.after(async () => {
    for (const p of pods) await p.remove();
  });
  pods.push(await createNamedNetns(`eni-cp-pod-${process.pid}`));
  pods.push(await createProcNetns('proc-pod'));

  for (const pod of pods) {
    const id = newId();
    // CNI_ARGS in a shuffled order, as containerd sends them.
    const args = {
      K8S_POD_UID: `uid-${pod.shape}`,
      IgnoreUnknown: '1',
      K8S_POD_NAME: `pod-${pod.shape}`,
      K8S_POD_INFRA_CONTAINER_ID: id,
      K8S_POD_NAMESPACE: 'default',
    };
    const add = await e.call({ command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0', args });
    assert.equal(add.code, 0, `ADD (${pod.shape}): ${add.stdout} ${add.stderr}`);
    const ip = e.standin.allocations.get(`aws-cni/${id}/eth0`)!;
    assert.ok(ip, 'the stand-in allocated an IP');
    const req = e.standin.calls.find((c) => c.method === 'AddNetwork' && c.request.container_id === id)!.request;
    assert.deepEqual(
      [
        req.api_version,
        req.if_name,
        req.network_name,
        req.netns,
        req.k8s_pod_name,
        req.k8s_pod_namespace,
        req.k8s_pod_uid,
        req.k8s_pod_infra_container_id,
      ],
      [1, 'eth0', 'aws-cni', pod.path, `pod-${pod.shape}`, 'default', `uid-${pod.shape}`, id],
    );
    const [hostIf, podIf] = add.json.interfaces;
    assert.deepEqual(add.json.ips, [{ address: `${ip}/32`, gateway: '169.254.1.1', interface: 1 }]);
    assert.deepEqual(add.json.routes, [{ dst: '0.0.0.0/0' }]);
    assert.deepEqual(podIf, { name: 'eth0', mac: podIf.mac, sandbox: pod.path });
    assert.ok(hostIf.name.startsWith('eni') && hostIf.name.length <= 15 && !hostIf.sandbox);

    const checkWired = async () => {
      const [link] = await ipj(pod.path, ['addr', 'show', 'dev', 'eth0']);
      assert.ok(link.flags.includes('UP'));
      assert.equal(link.mtu, 9001);
      assert.equal(link.address, podIf.mac);
      assert.ok(
        link.addr_info.some((a: { local: string; prefixlen: number }) => a.local === ip && a.prefixlen === 32),
        JSON.stringify(link),
      );
      const routes = await ipj(pod.path, ['route', 'show']);
      assert.ok(
        routes.some((r) => r.dst === '169.254.1.1' && r.dev === 'eth0' && r.scope === 'link'),
        JSON.stringify(routes),
      );
      assert.ok(
        routes.some((r) => r.dst === 'default' && r.gateway === '169.254.1.1' && r.dev === 'eth0'),
        JSON.stringify(routes),
      );
      const [hostLink] = await ipj(e.node.path, ['link', 'show', 'dev', hostIf.name]);
      assert.equal(hostLink.address, hostIf.mac);
      assert.equal(hostLink.mtu, 9001);
      const neigh = await ipj(pod.path, ['neigh', 'show', '169.254.1.1', 'dev', 'eth0']);
      assert.equal(neigh[0]?.lladdr, hostLink.address);
      assert.ok(neigh[0].state.includes('PERMANENT'), JSON.stringify(neigh));
      const [lo] = await ipj(pod.path, ['link', 'show', 'dev', 'lo']);
      assert.ok(lo.flags.includes('UP'));
      const hostRoutes = await ipj(e.node.path, ['route', 'show', `${ip}/32`]);
      assert.equal(hostRoutes[0]?.dev, hostIf.name);
      assert.equal(hostRoutes[0]?.scope, 'link');
    };
    await checkWired();
    await tcpSendFrom(pod.path, NODE_ADDR, 8080, `hello-${pod.shape}`);
    await waitFor(
      'the node to see the pod connection from the pod IP',
      () => seen.includes(`hello-${pod.shape} ${ip}`),
      5000,
    );

    // A repeated ADD for the same key succeeds and leaves the same wiring.
    const again = await e.call({ command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0', args });
    assert.equal(again.code, 0, `repeated ADD: ${again.stdout}`);
    assert.deepEqual(again.json, add.json);
    await checkWired();
    assert.equal((await ipj(e.node.path, ['link', 'show', 'type', 'veth'])).length, 1);

    // DEL twice, then with an empty netns (containerd's RemovePodSandbox DEL): all succeed.
    for (const netns of [pod.path, pod.path, '']) {
      const del = await e.call({ command: 'DEL', containerId: id, netns, ifName: 'eth0', args });
      assert.equal(del.code, 0, `DEL (netns "${netns}"): ${del.stdout}`);
      assert.equal(del.stdout, '');
    }
    assert.deepEqual(await ipj(e.node.path, ['link', 'show', 'type', 'veth']), [], 'host veth removed');
    assert.deepEqual(await ipj(e.node.path, ['route', 'show', `${ip}/32`]), [], 'host route removed');
    assert.deepEqual(await ipj(pod.path, ['link', 'show', 'dev', 'eth0']).catch(() => []), [], 'pod interface removed');
    assert.equal(e.standin.allocations.size, 0);
    const reasons = e.standin.calls.flatMap((c) =>
      c.method === 'DelNetwork' && c.request.container_id === id ? [c.request.reason] : [],
    );
    assert.deepEqual(reasons, ['cni-del', 'cni-del', 'cni-del']);
  }
  const log = (await readFile(logFile, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(log.length, 10);
  assert.deepEqual(
    log.map((l) => `${l.verb}:${l.outcome}`),
    ['ADD:ok', 'ADD:ok', 'DEL:ok', 'DEL:ok', 'DEL:ok', 'ADD:ok', 'ADD:ok', 'DEL:ok', 'DEL:ok', 'DEL:ok'],
  );
  assert.ok(log.every((l) => typeof l.ms === 'number' && l.containerId.length === 64));
  // Each line names its pod, so a plugin log can be read for one pod without the container id.
  const adds = log.filter((l) => l.verb === 'ADD');
  assert.deepEqual(
    adds.map((l) => `${l.podNamespace}/${String(l.podName).replace(/^pod-.*/, 'pod-*')}`),
    adds.map(() => 'default/pod-*'),
  );
});

test('DEL with ipamd stopped still removes the veth and succeeds', async (t) => {
  const e = await setup(t, 'down');
  const pod = await createNamedNetns(`eni-cp-podd-${process.pid}`);
  t.after(() => pod.remove());
  const id = newId();
  const add = await e.call({ command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0' });
  assert.equal(add.code, 0, add.stdout);
  assert.equal((await ipj(e.node.path, ['link', 'show', 'type', 'veth'])).length, 1);
  await e.standin.stop();
  const del = await e.call({ command: 'DEL', containerId: id, netns: pod.path, ifName: 'eth0' });
  assert.equal(del.code, 0, `DEL: ${del.stdout} ${del.stderr}`);
  assert.match(del.stderr, /reclaim/);
  assert.deepEqual(await ipj(e.node.path, ['link', 'show', 'type', 'veth']), []);
  // ADD with ipamd down: try again later.
  const add2 = await e.call({ command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0' });
  assert.equal(add2.code, 1);
  assert.equal(add2.json.code, 11);
});

test('bad input and failed wiring give the spec error codes', async (t) => {
  const e = await setup(t, 'bad');
  const pod = await createNamedNetns(`eni-cp-podb-${process.pid}`);
  t.after(() => pod.remove());
  const base = { command: 'ADD' as const, containerId: newId(), netns: pod.path, ifName: 'eth0' };

  const notJson = await e.call({ ...base, config: '{"cniVersion": "1.0.0", ' });
  assert.equal(notJson.code, 1);
  assert.equal(notJson.json.code, 6);
  const badVersion = await e.call({ ...base, config: { ...e.config, cniVersion: '9.9.9' } });
  assert.equal(badVersion.json.code, 1);
  assert.deepEqual(Object.keys(badVersion.json).sort(), ['cniVersion', 'code', 'details', 'msg']);
  const noNetns = await e.call({ ...base, netns: '' });
  assert.equal(noNetns.json.code, 4);
  assert.match(noNetns.json.msg, /CNI_NETNS/);
  const badConf = await e.call({ ...base, config: { ...e.config, vethPrefix: 'toolong' } });
  assert.equal(badConf.json.code, 7);
  // The verbs' version gates (CNI spec: GC and STATUS from 1.1.0) and CHECK's prevResult.
  for (const verb of ['GC', 'STATUS'] as const) {
    const r = await e.call({ ...base, command: verb });
    assert.deepEqual([r.code, r.json.code, r.json.msg], [1, 1, `config version does not allow ${verb}`]);
  }
  const noPrev = await e.call({ ...base, command: 'CHECK' });
  assert.deepEqual([noPrev.code, noPrev.json.code, noPrev.json.msg], [1, 7, 'prevResult is missing']);
  const unknownVerb = await e.call({ ...base, command: 'FROB' as 'ADD' });
  assert.deepEqual([unknownVerb.json.code, unknownVerb.json.msg], [4, 'CNI_COMMAND FROB is not implemented yet']);
  const version = await e.call({ ...base, command: 'VERSION', config: '' });
  assert.deepEqual(version.json, {
    cniVersion: '1.1.0',
    supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
  });
  assert.equal(e.standin.calls.length, 0, 'no RPC for invalid input');

  // A netns path that does not exist: clear error naming it, IP handed back with "add-failed".
  const missing = `/var/run/netns/does-not-exist-${process.pid}`;
  const id = newId();
  const r = await e.call({ ...base, containerId: id, netns: missing, config: { ...e.config, cniVersion: '0.4.0' } });
  assert.equal(r.code, 1);
  assert.equal(r.json.code, 5);
  assert.equal(r.json.cniVersion, '0.4.0');
  assert.ok(r.json.msg.includes(missing), r.json.msg);
  assert.deepEqual(
    e.standin.calls.map((c) => [c.method, c.request.container_id, 'reason' in c.request ? c.request.reason : '']),
    [
      ['AddNetwork', id, ''],
      ['DelNetwork', id, 'add-failed'],
    ],
  );
  assert.equal(e.standin.allocations.size, 0);
  assert.deepEqual(await ipj(e.node.path, ['link', 'show', 'type', 'veth']), [], 'no veth left behind');

  // The interface name is taken inside the pod: wiring fails, nothing is left behind.
  await ipIn(pod.path, ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'other0']);
  const clash = await e.call({ ...base, containerId: newId() });
  assert.equal(clash.json.code, 5, clash.stdout);
  assert.deepEqual(await ipj(e.node.path, ['link', 'show', 'type', 'veth']), []);
  assert.equal(e.standin.allocations.size, 0);
  assert.equal(e.standin.calls.at(-1)?.method, 'DelNetwork');

  // ipamd refusing: version skew → 100; no IP now → 11.
  e.standin.failAdd = { code: grpc.status.FAILED_PRECONDITION, details: 'api_version 1 not supported' };
  const skew = await e.call({ ...base, containerId: newId() });
  assert.equal(skew.json.code, 100);
  assert.match(skew.json.details, /FAILED_PRECONDITION/);
  e.standin.failAdd = { code: grpc.status.RESOURCE_EXHAUSTED, details: 'no IP within 10 s' };
  const empty = await e.call({ ...base, containerId: newId() });
  assert.equal(empty.json.code, 11);
});
