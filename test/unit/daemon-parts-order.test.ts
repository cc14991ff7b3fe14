/**
 * The start-up and shutdown guarantees of ipamd's order, each kept as a declared `needs`
 * edge of its parts (ipamd/daemon.ts): whatever order the parts were listed in (as
 * declared, reversed, shuffled), the runner's order keeps each one. Removing the edge
 * behind a guarantee makes its test fail.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonParts } from '../../ipamd/daemon.js';
import type { IpamdConfig } from '../../ipamd/config.js';
import type { DaemonParts } from '../../ipamd/lifecycle/daemon-registry.js';
import type { Logger } from '../../ipamd/log.js';
import { startOrder, type AnyPart } from '../../ipamd/lifecycle/runner.js';

type Name = keyof DaemonParts;
const declared = daemonParts({ config: {} as IpamdConfig, log: {} as Logger, t0: 0 });

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** The parts listed as declared, reversed, and in 30 seeded shuffles. */
const listings: Array<[string, AnyPart<DaemonParts>[]]> = [
  ['declared', declared],
  ['reversed', [...declared].reverse()],
  ...Array.from({ length: 30 }, (_, seed): [string, AnyPart<DaemonParts>[]] => {
    const r = rng(seed + 1);
    const s = [...declared];
    for (let i = s.length - 1; i > 0; i--) {
      const j = Math.floor(r() * (i + 1));
      [s[i], s[j]] = [s[j]!, s[i]!];
    }
    return [`shuffle ${seed + 1}`, s];
  }),
];

/** Asserts `first` starts before every part of `then` in every listing (so it stops after them). */
function startsBefore(first: Name, then: Name[]): void {
  for (const [how, parts] of listings) {
    const order = startOrder(parts).map((p) => p.name);
    for (const t of then)
      assert.ok(order.indexOf(first) < order.indexOf(t), `${how}: ${first} must start before ${t}: ${order.join(' ')}`);
  }
}

test('the declared list is the start order', () => {
  assert.deepEqual(
    startOrder(declared).map((p) => p.name),
    declared.map((p) => p.name),
  );
});

test('spooled DELs are applied before the first evidence pass (none is adopted)', () => {
  startsBefore('del-spool', ['evidence']);
});

test('no serving before restore: the checkpoint, the spooled DELs and the evidence come before the gRPC server', () => {
  startsBefore('checkpoint', ['rpc', 'cni-exec', 'serving']);
  startsBefore('del-spool', ['rpc', 'cni-exec', 'serving']);
  startsBefore('evidence', ['rpc', 'cni-exec', 'serving']);
});

test('host networking is set up before the pool can hand out a new ENI, and before serving', () => {
  startsBefore('host-network', ['pool', 'rpc', 'pool-loop']);
});

test('the exec socket listens after the gRPC server it calls, and the CNI is installed only once both answer', () => {
  startsBefore('rpc', ['cni-exec', 'cni-install']);
  startsBefore('cni-exec', ['cni-install']);
});

test("the spool's watch starts once the exec socket exists (entries spooled until then are picked up)", () => {
  startsBefore('cni-exec', ['spool-watch']);
});

test('the stop drains the exec socket and the gRPC server while the pool still runs, then stops the pool', () => {
  startsBefore('pool-loop', ['drain']); // reverse: drain stops first
  startsBefore('cni-exec', ['drain']);
  startsBefore('rpc', ['drain']);
});

test("the stop's EC2 grace is disarmed and the EC2 client closed right after the pool stops", () => {
  startsBefore('stop-grace', ['pool-loop']);
  startsBefore('pool', ['stop-grace']);
});

test('the reporter stops before the drain (a stopping pool must not read as "cannot serve"), stopping is announced first', () => {
  startsBefore('drain', ['kube-reporting']);
  startsBefore('kube-reporting', ['eniconfig-follow']);
  for (const [how, parts] of listings)
    assert.equal(
      startOrder(parts).at(-1)?.name,
      'serving',
      `${how}: serving starts last (every part runs), so its stop comes first`,
    );
});

test('the checkpoint flushes after everything that commits has stopped', () => {
  startsBefore('checkpoint', ['del-spool', 'evidence', 'service', 'rpc', 'cni-exec', 'pool-loop', 'drain']);
});

test('no release before the evidence is read: the pool loop and the ENI lifecycle start after the evidence', () => {
  startsBefore('evidence', ['pool-loop']);
});

test('host networking and the evidence (kernel, spawn helper) stop after the pool and the servers', () => {
  startsBefore('host-network', ['pool-loop', 'drain']);
  startsBefore('kernel', ['evidence', 'service', 'cni-exec']);
  startsBefore('evidence', ['pool-loop', 'drain']);
});
