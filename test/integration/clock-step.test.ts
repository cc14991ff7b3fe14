/**
 * Monotonic time for every duration (issue 28 item 5; docs/design.md#time): the real ipamd
 * on the simulated cloud, its wall clock stepped back and forward by hours while pods
 * churn (test/helpers/wall-clock-step.ts shifts `Date` inside ipamd only; the machine's
 * clock is not touched). Released addresses come out of the IP cooldown once the period has
 * passed, never earlier (no ADD is handed a cooling address) and never hours later, within
 * one run and across a restart (the next ipamd converts the checkpoint's stamps through its
 * `monoAtBoot`: docs/design.md#time).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createNode } from '../../kit/node-harness.js';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { waitFor } from '../../kit/wait.js';
import type { IpamdProcess } from '../../kit/ipamd-process.js';

const PERIOD_MS = 2000;
/** How late past the period an address may leave cooldown: the datastore is read on demand, the test polls every 25 ms. */
const LATE_MS = 1500;
const HOUR = 3_600_000;
const PRELOAD = new URL('../helpers/wall-clock-step.js', import.meta.url).href;

let seq = 0;
const id = () => `clk${process.pid}x${seq++}`;

/** ADDs `n` new containers; returns their ids and IPs. */
async function addMany(c: TestIpamdClient, n: number): Promise<Array<{ id: string; ip: string }>> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const k = id();
    const r = await c.add(k);
    assert.equal(r.success, true);
    out.push({ id: k, ip: r.ipv4_addr });
  }
  return out;
}

/**
 * DELs `pods`, runs `step` (a wall-clock step, or a restart), churns (ADDs that must
 * not get a cooling address), and checks the released addresses leave cooldown after the
 * period and not later than {@link LATE_MS} past it.
 */
async function releaseAcrossStep(
  d: () => IpamdProcess,
  c: () => TestIpamdClient,
  pods: Array<{ id: string; ip: string }>,
  step: () => Promise<void>,
): Promise<Array<{ id: string; ip: string }>> {
  const cooling0 = (await d().status()).counts.cooling as number;
  const t0 = performance.now();
  for (const p of pods) assert.equal((await c().del(p.id)).released, true);
  await step();
  const released = new Set(pods.map((p) => p.ip));
  const churn = await addMany(c(), 2);
  for (const p of churn)
    assert.ok(
      !released.has(p.ip) || performance.now() - t0 >= PERIOD_MS,
      `ADD got ${p.ip} ${Math.round(performance.now() - t0)} ms after its release (cooldown ${PERIOD_MS} ms)`,
    );
  const freed = await waitFor(
    'the released addresses out of cooldown',
    async () => {
      const cooling = (await d().status()).counts.cooling as number;
      const at = performance.now() - t0;
      if (at < PERIOD_MS - 50)
        assert.ok(cooling >= cooling0 + pods.length, `cooldown ended early, ${Math.round(at)} ms`);
      return cooling <= cooling0 ? at : undefined;
    },
    PERIOD_MS + LATE_MS,
    25,
  );
  assert.ok(freed >= PERIOD_MS - 50, `out of cooldown after ${Math.round(freed)} ms`);
  return churn;
}

test('IP cooldown under wall-clock steps of hours while pods churn, and across a restart', async (t) => {
  const h = await createNode({
    ipamdEnv: {
      IP_COOLDOWN_PERIOD: String(PERIOD_MS / 1000),
      WARM_IP_TARGET: '8',
      NODE_OPTIONS: `--import=${PRELOAD}`,
    },
  });
  t.after(() => h.close());
  const offsetFile = path.join(h.dir, 'wall-offset-ms');
  let offset = 0;
  let tick = 1;
  const setWall = async (deltaMs: number) => {
    offset += deltaMs;
    writeFileSync(offsetFile, String(offset));
    utimesSync(offsetFile, tick, tick++); // a distinct mtime per write, however fast
  };
  writeFileSync(offsetFile, '0');
  h.env.ENI_IPAM_TEST_WALL_OFFSET_FILE = offsetFile;
  let d = await h.startIpamd();
  let c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('a warm pool', async () => ((await d.status()).counts.available as number) >= 6);

  let pods = await addMany(c, 3);
  for (const stepMs of [-3 * HOUR, 5 * HOUR, -7 * HOUR, 2 * HOUR]) {
    const churn = await releaseAcrossStep(
      () => d,
      () => c,
      pods,
      () => setWall(stepMs),
    );
    pods = [...churn, ...(await addMany(c, 1))];
  }

  // Across a restart: the wall clock steps back 6 h while ipamd is down.
  const restarted = async () => {
    c.close();
    await d.stop(15_000);
    await setWall(-6 * HOUR);
    d = await h.startIpamd();
    c = ipamdClient(h.socket);
  };
  await releaseAcrossStep(
    () => d,
    () => c,
    pods,
    restarted,
  );
});

test('a forward wall-clock step while ipamd is down: the restored cooldown lasts what is left of it, not 0', async (t) => {
  // Long enough that the restart (stop + start, seconds on a loaded machine) ends well within it.
  const period = 20_000;
  const h = await createNode({
    ipamdEnv: { IP_COOLDOWN_PERIOD: String(period / 1000), WARM_IP_TARGET: '4', NODE_OPTIONS: `--import=${PRELOAD}` },
  });
  t.after(() => h.close());
  const offsetFile = path.join(h.dir, 'wall-offset-ms');
  writeFileSync(offsetFile, '0');
  h.env.ENI_IPAM_TEST_WALL_OFFSET_FILE = offsetFile;
  let d = await h.startIpamd();
  let c = ipamdClient(h.socket);
  t.after(() => c.close());
  await waitFor('a warm pool', async () => ((await d.status()).counts.available as number) >= 4);
  const pods = await addMany(c, 3);
  const t0 = performance.now();
  for (const p of pods) assert.equal((await c.del(p.id)).released, true);
  c.close();
  await d.stop(15_000);
  // The wall clock jumps 6 h ahead while ipamd is down (NTP after a long outage, a resumed VM).
  writeFileSync(offsetFile, String(6 * HOUR));
  d = await h.startIpamd();
  c = ipamdClient(h.socket);
  const released = new Set(pods.map((p) => p.ip));
  const cooling = () => d.status().then((s) => s.counts.cooling as number);
  const elapsed = performance.now() - t0;
  assert.ok(elapsed < period - 2000, `the restart took ${Math.round(elapsed)} ms of the ${period} ms cooldown`);
  assert.equal(await cooling(), 3, `${Math.round(elapsed)} ms after their release the addresses still cool`);
  for (const p of await addMany(c, 4))
    assert.ok(!released.has(p.ip), `ADD got ${p.ip} ${Math.round(performance.now() - t0)} ms after its release`);
  const freed = await waitFor(
    'the released addresses out of cooldown',
    async () => ((await cooling()) === 0 ? performance.now() - t0 : undefined),
    period + LATE_MS,
    100,
  );
  assert.ok(freed >= period - 50, `out of cooldown after ${Math.round(freed)} ms`);
});
