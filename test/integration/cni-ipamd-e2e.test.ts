/**
 * The real CNI plugin binary against a live ipamd (itself on the simulated cloud), in
 * real network namespaces: a "node" namespace where the plugin runs (so the real host
 * is untouched) and pod namespaces of both shapes. Checks what the kernel holds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, createProcNetns, ipIn, tcpSendFrom, type Netns } from '../../kit/netns.js';
import { createNode } from '../../kit/node-harness.js';
import { waitFor } from '../../kit/wait.js';

const j = async (path: string, args: string[]) => JSON.parse((await ipIn(path, ['-j', ...args])) || '[]');

test('plugin ADD/DEL through ipamd in real namespaces, both netns shapes', async (t) => {
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '4' } });
  t.after(() => h.close());
  const node = await createNamedNetns(`eni-t-node-${process.pid}`);
  t.after(() => node.remove());
  const pods: Netns[] = [await createNamedNetns(`eni-t-pod-${process.pid}`), await createProcNetns('proc-pod')];
  t.after(async () => {
    for (const p of pods) await p.remove();
  });
  const d = await h.startIpamd();
  await ipIn(node.path, ['addr', 'add', `${h.nodeIp}/32`, 'dev', 'lo']);
  // A TCP server in the node namespace that reports who connected.
  const server = spawn(
    'nsenter',
    [
      `--net=${node.path}`,
      process.execPath,
      '-e',
      `require('net').createServer(s=>s.once('data',d=>{console.log(d.toString().trim()+' '+s.remoteAddress);s.end('ok\\n')})).listen(8080,'${h.nodeIp}',()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  let seen = '';
  server.stdout!.on('data', (b: Buffer) => (seen += b.toString()));
  await waitFor('the node TCP server', () => seen.includes('listening'));

  const config = { cniVersion: '1.0.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, mtu: 9001 };
  const call = (c: Omit<CniCall, 'config' | 'prefix'>) =>
    execPlugin({ ...c, config, prefix: ['nsenter', `--net=${node.path}`] });
  for (const pod of pods) {
    const id = randomBytes(32).toString('hex');
    const add = await call({
      command: 'ADD',
      containerId: id,
      netns: pod.path,
      ifName: 'eth0',
      args: { K8S_POD_NAME: pod.name, K8S_POD_NAMESPACE: 'default', IgnoreUnknown: '1' },
    });
    assert.equal(add.code, 0, `ADD (${pod.shape}) failed: ${add.stdout} ${add.stderr}`);
    const ip = String(add.json.ips[0].address).split('/')[0]!;
    assert.equal(add.json.ips[0].address, `${ip}/32`);
    const hostIf = add.json.interfaces.find((i: { sandbox?: string }) => !i.sandbox);
    const podIf = add.json.interfaces.find((i: { sandbox?: string }) => i.sandbox);
    assert.equal(podIf.sandbox, pod.path);

    // Inside the pod: interface, /32 address, both routes, permanent neighbour to the host veth MAC.
    const [link] = await j(pod.path, ['addr', 'show', 'dev', 'eth0']);
    assert.equal(link.operstate === 'UP' || link.flags.includes('UP'), true);
    assert.ok(link.addr_info.some((a: { local: string; prefixlen: number }) => a.local === ip && a.prefixlen === 32));
    const routes = await j(pod.path, ['route', 'show']);
    assert.ok(
      routes.some(
        (r: { dst: string; dev: string; scope?: string }) =>
          r.dst === '169.254.1.1' && r.dev === 'eth0' && r.scope === 'link',
      ),
      JSON.stringify(routes),
    );
    assert.ok(
      routes.some((r: { dst: string; gateway?: string }) => r.dst === 'default' && r.gateway === '169.254.1.1'),
      JSON.stringify(routes),
    );
    const [hostLink] = await j(node.path, ['link', 'show', 'dev', hostIf.name]);
    const neigh = await j(pod.path, ['neigh', 'show', '169.254.1.1', 'dev', 'eth0']);
    assert.equal(neigh[0]?.lladdr, hostLink.address);
    assert.ok(neigh[0].state.includes('PERMANENT'));
    // On the node: the host route to the pod.
    const hostRoutes = await j(node.path, ['route', 'show', `${ip}/32`]);
    assert.equal(hostRoutes[0]?.dev, hostIf.name);
    // Traffic: the pod reaches the node, which sees the pod's own IP.
    await tcpSendFrom(pod.path, h.nodeIp, 8080, `hello-${pod.shape}`);
    await waitFor('the node to see the pod connection', () => seen.includes(`hello-${pod.shape} ${ip}`), 5000);

    // DEL twice, then with no netns (containerd's second DEL): all succeed, one release.
    for (const netns of [pod.path, pod.path, '']) {
      const del = await call({ command: 'DEL', containerId: id, netns, ifName: 'eth0' });
      assert.equal(del.code, 0, `DEL failed: ${del.stdout}`);
    }
    assert.deepEqual(await j(node.path, ['link', 'show', 'type', 'veth']), [], 'host veth removed');
    const s = await d.status();
    assert.equal(s.counts.assigned, 0);
  }
  assert.equal(h.sim.countCalls('UnassignPrivateIpAddresses'), 0, 'DEL returns IPs to the warm pool, not to EC2');
});

test('ADD into a netns path that does not exist fails clearly and the IP goes back to the pool', async (t) => {
  const h = await createNode({ ipamdEnv: { WARM_IP_TARGET: '2' } });
  t.after(() => h.close());
  const node = await createNamedNetns(`eni-t-node2-${process.pid}`);
  t.after(() => node.remove());
  const d = await h.startIpamd();
  await waitFor('a warm pool', async () => (await d.status()).counts.available >= 2);
  const missing = `/var/run/netns/does-not-exist-${process.pid}`;
  const r = await execPlugin({
    command: 'ADD',
    containerId: 'c'.repeat(64),
    netns: missing,
    ifName: 'eth0',
    prefix: ['nsenter', `--net=${node.path}`],
    config: { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket },
  });
  assert.equal(r.code, 1);
  assert.ok(r.json && typeof r.json.code === 'number' && r.json.code > 0);
  assert.match(`${r.json.msg} ${r.json.details ?? ''}`, new RegExp(missing.replace(/[/.-]/g, '\\$&')));
  const s = await d.status();
  assert.equal(s.counts.assigned, 0, 'the assignment was returned');
  assert.deepEqual(await j(node.path, ['link', 'show', 'type', 'veth']), [], 'no veth left behind');
});
