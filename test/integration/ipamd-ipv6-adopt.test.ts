/**
 * The IPv6 checkpoint lost while pods run (issue #31 safety gap): the real ipamd on the
 * simulated cloud (a dual-stack subnet), the real bundled plugin in a "node" netns, real
 * pod netns with /128s wired to veths. ipamd stops, `<checkpoint>.ipv6` (and its journal) is
 * deleted, or overwritten with garbage (then set aside as `.corrupt-<time>`), ipamd starts: the live pods' /128s, read from the kernel's routes, are quarantined before the
 * first ADD, so no new pod gets an address a live pod holds; then the evidence pass gives
 * each back to the sandbox the runtime shows holding it, so the pods' DELs free them all.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { execPlugin, type CniCall } from '../../kit/cni-exec.js';
import { createNamedNetns, ipIn, type Netns } from '../../kit/netns.js';
import { startIpv6Node } from '../helpers/ipv6-node.js';
import { waitFor } from '../../kit/wait.js';

const ADOPT_MSG = 'IPv6: wired addresses no allocation holds quarantined';

/** Three pods, ipamd down, its IPv6 checkpoint deleted (`lost`) or overwritten with garbage (`corrupt`), ipamd up. */
async function checkpointGone(t: TestContext, how: 'lost' | 'corrupt', name: string): Promise<void> {
  const { h, node } = await startIpv6Node(t, name, {
    DISABLE_METRICS: 'false',
    METRICS_BIND_ADDRESS: '127.0.0.1:0',
    ENI_IPAM_GC_INTERVAL: '1s',
  });
  const cri = h.cri!;
  const config = { cniVersion: '1.1.0', name: 'aws-cni', type: 'eni-ipam', ipamdSocket: h.socket, mtu: 9001 };
  const call = (c: Omit<CniCall, 'config' | 'prefix'>) =>
    execPlugin({ ...c, config, prefix: ['nsenter', `--net=${node.path}`] });

  const pods: { ns: Netns; id: string; ipv6?: string }[] = [];
  t.after(async () => {
    for (const p of pods) await p.ns.remove();
  });
  const addPod = async (i: number): Promise<{ code: number; ipv6?: string; out: string }> => {
    const ns = await createNamedNetns(`eni-${name}-pod${i}-${process.pid}`);
    const id = randomBytes(32).toString('hex');
    const p: { ns: Netns; id: string; ipv6?: string } = { ns, id };
    pods.push(p);
    const add = await call({ command: 'ADD', containerId: id, netns: ns.path, ifName: 'eth0' });
    if (add.code !== 0) return { code: add.code, out: `${add.stdout} ${add.stderr}` };
    const r = JSON.parse(add.stdout) as { ips: { address: string }[] };
    p.ipv6 = r.ips[0]!.address.replace(/\/128$/, '');
    cri.addPod(id, p.ipv6);
    return { code: 0, ipv6: p.ipv6, out: add.stdout };
  };
  for (let i = 0; i < 3; i++) {
    const r = await addPod(i);
    assert.equal(r.code, 0, `ADD: ${r.out}`);
  }
  const live = pods.map((p) => p.ipv6!);
  const routes = await ipIn(node.path, ['-6', 'route', 'show', 'table', 'main']);
  for (const ip of live) assert.match(routes, new RegExp(`^${ip} dev `, 'm'), 'the /128 host route is wired');

  // ipamd goes down and its IPv6 checkpoint is lost; the pods keep running.
  await h.ipamd!.stop(5000);
  if (how === 'lost') {
    await rm(`${h.checkpoint}.ipv6`);
    await rm(`${h.checkpoint}.ipv6.journal`, { force: true }); // its journal with it (ipv6-file.ts)
  } else {
    // A torn or overwritten file: set aside for forensics, ipamd rebuilds rather than refuse to start.
    await writeFile(`${h.checkpoint}.ipv6`, '{"version":1,"allocations":[{"ipv6":');
    await writeFile(`${h.checkpoint}.ipv6.journal`, 'garbage\n{"version":1}\n');
  }
  await h.startIpamd();
  if (how === 'corrupt') {
    const aside = (await readdir(path.dirname(h.checkpoint))).filter((f) => /\.ipv6(\.journal)?\.corrupt-/.test(f));
    assert.equal(aside.length, 2, `the snapshot and the journal set aside: ${aside.join(', ')}`);
  }

  const fresh: string[] = [];
  for (let i = 3; i < 6; i++) {
    const r = await addPod(i);
    if (r.ipv6) fresh.push(r.ipv6);
    if (r.ipv6)
      assert.ok(!live.includes(r.ipv6), `new pod ${i} got ${r.ipv6}, which a live pod holds (${live.join(', ')})`);
    assert.equal(r.code, 0, `ADD after the checkpoint loss: ${r.out}`);
  }
  assert.equal(new Set([...live, ...fresh]).size, 6, 'six distinct /128s');

  const log = await readFile(path.join(h.dir, 'ipamd.log'), 'utf8');
  const adopt = log
    .split('\n')
    .filter((l) => l.includes(ADOPT_MSG))
    .map((l) => JSON.parse(l) as { adopted: number; adoptedV6: number; addresses: string[] });
  assert.equal(adopt.length, 2, 'one adoption line per start');
  assert.equal(adopt[0]!.adopted, 0, 'first start: nothing wired');
  const restart = adopt[1]!;
  assert.equal(restart.adoptedV6, 3);
  assert.equal(restart.adopted, 6, 'three /128s and three egress IPv4s');
  for (const ip of live) assert.ok(restart.addresses.includes(ip), `${ip} adopted`);
  const gauge = async (): Promise<string> =>
    (
      (await (await fetch(`http://127.0.0.1:${h.ipamd!.metricsPort}/metrics`)).text()).match(
        /^eni_ipam_ipv6_addresses\{state="(assigned|quarantined)"\} \d+$/gm,
      ) ?? []
    ).join(', ');
  const want = (assigned: number, quarantined: number) =>
    `eni_ipam_ipv6_addresses{state="assigned"} ${assigned}, eni_ipam_ipv6_addresses{state="quarantined"} ${quarantined}`;
  // The runtime lists the three live sandboxes: an evidence pass makes their /128s and egress IPv4s theirs again.
  await waitFor(
    'the live pods own their quarantined addresses again',
    async () => (await gauge()) === want(6, 0),
    90_000,
    200,
  );

  for (const p of pods) {
    const del = await call({ command: 'DEL', containerId: p.id, netns: p.ns.path, ifName: 'eth0' });
    assert.equal(del.code, 0, del.stdout);
  }
  assert.equal(await gauge(), want(0, 0), 'every DEL freed its addresses, none left quarantined');
}

test('IPv6 mode: after the IPv6 checkpoint is lost, new pods never get a /128 a live pod holds', (t) =>
  checkpointGone(t, 'lost', 'i6a'));

test('IPv6 mode: a corrupt IPv6 checkpoint is set aside; new pods never get a /128 a live pod holds', (t) =>
  checkpointGone(t, 'corrupt', 'i6c'));
