/**
 * Crash safety of the checkpoint's write path (snapshot + journal, ipamd/checkpoint/):
 * the real ipamd binary, against the simulated cloud, serves 1,000 ADD/DELs over gRPC
 * from 8 concurrent clients and is SIGKILLed at a random point of each round, with calls
 * in flight; after each restart the allocations it serves are checked against what it
 * acknowledged:
 * - every ADD answered (and not followed by a DEL) is held, with the same IP;
 * - every DEL answered (and not followed by an ADD) stays released: it does not resurrect;
 * - a call cut off by the kill may have happened or not (the runtime retries it);
 * - no IP is held twice.
 * IP_COOLDOWN_PERIOD=0, so a released IP is handed out again at once and a resurrected
 * allocation would collide with its next holder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { testSimNode } from '../../kit/sim-node.js';

/** Calls per round at most: the kill lands at a random one of them. */
const ROUND_OPS = 320;
const OPS = 1000;
const CLIENTS = 8;
const KEYS_PER_CLIENT = 6;

/** What the test knows of a key: held with an IP, released, or unknown (its last call was cut off). */
type Known = { state: 'held'; ip: string } | { state: 'released' } | { state: 'unknown' };

interface Served {
  containerID: string;
  ipv4: string;
}

/** Deterministic PRNG (mulberry32), so a failure can be replayed with the same seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Compares what ipamd serves with what it acknowledged; returns the violations and settles unknown keys. */
function check(known: Map<string, Known>, served: Served[], round: number): string[] {
  const bad: string[] = [];
  const byId = new Map(served.map((a) => [a.containerID, a.ipv4]));
  const ips = served.map((a) => a.ipv4);
  if (new Set(ips).size !== ips.length) bad.push(`round ${round}: an IP is held twice: ${JSON.stringify(served)}`);
  for (const [id, k] of known) {
    const ip = byId.get(id);
    if (k.state === 'held' && ip !== k.ip)
      bad.push(`round ${round}: acknowledged ADD of ${id} (${k.ip}) lost: ${ip ?? 'nothing held'}`);
    if (k.state === 'released' && ip !== undefined)
      bad.push(`round ${round}: acknowledged DEL of ${id} resurrected with ${ip}`);
    if (k.state === 'unknown') known.set(id, ip === undefined ? { state: 'released' } : { state: 'held', ip });
  }
  return bad;
}

test('SIGKILL at random points during 1,000 ADD/DELs: no acknowledged ADD lost, no acknowledged DEL resurrected', async (t) => {
  const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
  t.diagnostic(`seed ${seed} (CRASH_SEED=${seed} replays the choices)`);
  const random = rng(seed);
  const { node } = await testSimNode(t, {
    seed: 11,
    subnetCidr: '10.0.0.0/22',
    instanceType: 'c5.4xlarge',
    mode: 'child',
    cri: false,
    env: { WARM_IP_TARGET: String(CLIENTS * KEYS_PER_CLIENT + 4), IP_COOLDOWN_PERIOD: '0' },
  });
  await node.start();

  const known = new Map<string, Known>();
  const keys = Array.from({ length: CLIENTS }, (_, w) =>
    Array.from({ length: KEYS_PER_CLIENT }, (_, k) => `w${w}k${k}`),
  );
  for (const id of keys.flat()) known.set(id, { state: 'released' });
  const violations: string[] = [];
  let started = 0;
  let acked = 0;
  let cutOff = 0;
  let rounds = 0;
  for (let round = 0; started < OPS; round++, rounds++) {
    const budget = Math.min(OPS - started, ROUND_OPS);
    const killAt = started + Math.floor(random() * budget); // the kill lands while op #killAt is in flight
    const c: TestIpamdClient = ipamdClient(node.socket);
    let killed: Promise<void> | undefined;
    await Promise.all(
      keys.map(async (mine) => {
        while (started < OPS && !killed) {
          const id = mine[Math.floor(random() * mine.length)]!;
          const k = known.get(id)!;
          const op = k.state === 'held' ? 'del' : k.state === 'released' ? 'add' : random() < 0.5 ? 'add' : 'del';
          const n = started++;
          const call = op === 'add' ? c.add(id) : c.del(id);
          known.set(id, { state: 'unknown' });
          if (n === killAt) {
            // Let the request reach ipamd, then kill it somewhere in its handling (a few ms at most; a random point, not a wait).
            killed = new Promise((r) => setTimeout(r, random() * 3)).then(() => node.stop({ crash: true }));
          }
          try {
            const rep = await call;
            acked++;
            known.set(
              id,
              op === 'add' ? { state: 'held', ip: (rep as { ipv4_addr: string }).ipv4_addr } : { state: 'released' },
            );
          } catch {
            cutOff++; // stays unknown: the kill came before the answer
            break;
          }
        }
      }),
    );
    c.close();
    if (!killed) killed = node.stop({ crash: true });
    await killed;
    await node.start();
    const served = (await node.introspect('/v1/allocations')) as Served[];
    violations.push(...check(known, served, round));
  }
  t.diagnostic(`${started} calls, ${acked} acknowledged, ${cutOff} cut off by ${rounds} SIGKILLs`);
  assert.deepEqual(violations, []);
  assert.ok(started >= OPS, `ran ${started} calls`);
  assert.ok(acked >= OPS - rounds * CLIENTS, `every call not cut off was answered (${acked})`);
});
