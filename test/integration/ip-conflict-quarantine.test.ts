/**
 * Last line of defence at wiring time (docs/design.md#13-evidence-before-trust item 4), end to end: the real ipamd on
 * the simulated cloud, the real plugin in a node netns. Pod A is live with IP x; ipamd
 * loses A's allocation (a DelNetwork behind A's back, as in the seed outage where a
 * lying source released live allocations), so x is free again in ipamd and is handed to
 * a new pod. That ADD must be refused, A's route and traffic untouched, x quarantined
 * (status, metric, never handed out) until A's veth is gone, then served again.
 * ENI_IPAM_TEST_PLUGIN=shim runs it through the shim and ipamd's in-process exec path.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { tcpSendFrom } from '../../kit/netns.js';
import { ipIn, ipj, startCniNode } from '../helpers/cni-node.js';
import { ipamdClient } from '../../kit/ipamd-client.js';
import { parsePrometheusText, sample } from '../helpers/prom-text.js';
import { waitFor } from '../../kit/wait.js';

const newId = () => randomBytes(32).toString('hex');
const ipOf = (json: { ips: Array<{ address: string }> }) => json.ips[0]!.address.split('/')[0]!;

test('ADD of an IP a live pod still uses is refused; ipamd quarantines it until the pod is gone', async (t) => {
  // One ENI of an m5.large: 9 secondary IPs, so x comes round again once the others are taken.
  const n = await startCniNode(t, 'quar', {
    ipamdEnv: {
      MAX_ENI: '1',
      WARM_IP_TARGET: '9',
      IP_COOLDOWN_PERIOD: '0',
      ENI_IPAM_GC_INTERVAL: '500ms',
      DISABLE_METRICS: 'false',
      METRICS_BIND_ADDRESS: '127.0.0.1:0',
    },
  });
  await waitFor('9 warm IPs', async () => (await n.d.status()).counts.available >= 9);
  const metricsPort = await waitFor('metricsPort in the ipamd log', async () => {
    for (const line of (await readFile(path.join(n.h.dir, 'ipamd.log'), 'utf8')).split('\n')) {
      try {
        const o = JSON.parse(line) as { msg?: string; metricsPort?: number };
        if (o.msg === 'ipamd serving' && o.metricsPort) return o.metricsPort;
      } catch {
        /* not JSON */
      }
    }
    return undefined;
  });
  const metric = async (name: string) =>
    sample(parsePrometheusText(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()), name) ?? 0;

  await ipIn(n.node.path, ['addr', 'add', `${n.h.nodeIp}/32`, 'dev', 'lo']);
  const server = spawn(
    'nsenter',
    [
      `--net=${n.node.path}`,
      process.execPath,
      '-e',
      `require('net').createServer(s=>s.once('data',d=>{console.log(d.toString().trim()+' '+s.remoteAddress);s.end('ok\\n')})).listen(8080,'${n.h.nodeIp}',()=>console.log('listening'))`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    server.kill('SIGKILL');
  });
  let seen = '';
  server.stdout!.on('data', (b: Buffer) => (seen += b.toString()));
  await waitFor('the node TCP server', () => seen.includes('listening'));

  const podA = await n.pod();
  const idA = newId();
  const addA = await n.call({ command: 'ADD', containerId: idA, netns: podA.path, ifName: 'eth0' });
  assert.equal(addA.code, 0, addA.stdout);
  const x = ipOf(addA.json);
  const vethA = addA.json.interfaces[0].name as string;

  // ipamd loses A's allocation; A keeps running.
  const c = ipamdClient(n.h.socket);
  t.after(() => c.close());
  assert.equal((await c.del(idA, { reason: 'lost' })).released, true);

  // New pods take the other IPs, then one is handed x: refused.
  const others = new Map<string, string>();
  let refused: { id: string; out: Awaited<ReturnType<typeof n.call>> } | undefined;
  for (let i = 0; i < 9 && !refused; i++) {
    const pod = await n.pod();
    const id = newId();
    const out = await n.call({ command: 'ADD', containerId: id, netns: pod.path, ifName: 'eth0' });
    if (out.code === 0) others.set(id, ipOf(out.json));
    else refused = { id, out };
  }
  assert.ok(refused, `no ADD was refused; IPs handed out: ${[...others.values()].join(', ')} (x = ${x})`);
  assert.equal(refused.out.json.code, 11, refused.out.stdout);
  assert.match(refused.out.json.msg, new RegExp(`IP ${x.replace(/\./g, '\\.')} is already in use on this node`));
  assert.ok(![...others.values()].includes(x), 'x was never handed out successfully');

  // A is untouched: its route, and its traffic from x.
  assert.deepEqual(
    (await ipj(n.node.path, ['route', 'show', `${x}/32`])).map((r) => r.dev),
    [vethA],
  );
  await tcpSendFrom(podA.path, n.h.nodeIp, 8080, 'a-alive');
  await waitFor('the node to see A from x', () => seen.includes(`a-alive ${x}`), 5000);

  // ipamd: x quarantined (status, metrics), the refused pod holds nothing.
  const st = await n.d.status();
  assert.deepEqual(
    st.quarantinedIps.map((q: { ip: string }) => q.ip),
    [x],
  );
  assert.equal(await metric('eni_ipam_ip_conflicts_total'), 1);
  assert.equal(await metric('eni_ipam_quarantined_ips'), 1);
  assert.equal((await c.del(refused.id)).released, false, 'the refused ADD left no allocation');

  // Quarantine survives the re-check passes while A lives; a freed IP is served, x is not.
  const [freedId, freedIp] = [...others.entries()][0]!;
  assert.equal((await n.call({ command: 'DEL', containerId: freedId, netns: '', ifName: 'eth0' })).code, 0);
  // Not a wait: ipamd exposes no re-check pass count; 1.5 s is three re-check passes (500 ms) with A alive.
  await new Promise((r) => setTimeout(r, 1500));
  const pod = await n.pod();
  const next = await n.call({ command: 'ADD', containerId: newId(), netns: pod.path, ifName: 'eth0' });
  assert.equal(next.code, 0, next.stdout);
  assert.equal(ipOf(next.json), freedIp);
  assert.deepEqual(
    (await n.d.status()).quarantinedIps.map((q: { ip: string }) => q.ip),
    [x],
  );

  // A goes (its veth and route with it): the quarantine is lifted and x is served again.
  assert.equal((await n.call({ command: 'DEL', containerId: idA, netns: podA.path, ifName: 'eth0' })).code, 0);
  await waitFor('x out of quarantine', async () => (await n.d.status()).quarantinedIps.length === 0, 10_000);
  assert.equal(await metric('eni_ipam_quarantined_ips'), 0);
  const podC = await n.pod();
  const addC = await n.call({ command: 'ADD', containerId: newId(), netns: podC.path, ifName: 'eth0' });
  assert.equal(addC.code, 0, addC.stdout);
  assert.equal(ipOf(addC.json), x);
});
