/**
 * One episode of the warm-pool property test: a fresh simulated cloud (random EC2
 * latency, random IMDS lag), one node running the real ipamd, and a seeded random
 * interleaving of ADD, DEL, repeated ADD, DEL of an unknown key, shrink ticks, reconcile
 * waits and restarts, with several RPCs in flight at once. It records every pod's hold
 * interval from the replies, and checks as it goes:
 *   - every ADD gets an IP no other live pod holds, that EC2 shows on an ENI attached to
 *     the instance at reply time, or a clear error (RESOURCE_EXHAUSTED / UNAVAILABLE with
 *     a reason); a repeated ADD returns the same IP, also after a restart;
 *   - DEL of a held key releases exactly its IP, DEL of an unknown key releases nothing;
 * and at the end the release audit (release-audit.ts) over the whole call log, plus
 * ipamd's assigned count equal to the pods held.
 */
import * as grpc from '@grpc/grpc-js';
import { SimCloud } from '../../sim/index.js';
import { ipamdClient, type GrpcError, type TestIpamdClient } from '../../kit/ipamd-client.js';
import { auditReleases, inCidr, type Hold } from './release-audit.js';
import { createSimNode, type DaemonMode, type SimNode } from '../../kit/sim-node.js';

/** Seeded PRNG (mulberry32): floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The randomised set-up of one episode. Times in ms. */
export interface EpisodeConfig {
  seed: number;
  ops: number;
  mode: DaemonMode;
  instanceType: string;
  /** ipamd env on top of the node defaults. */
  env: Record<string, string>;
  /** EC2 latency per call, uniform in [0, maxLatencyMs]. */
  maxLatencyMs: number;
  /** IMDS lag after assign/unassign/attach. */
  imdsLagMs: number;
  /** RPCs in flight at most. */
  maxInFlight: number;
  /** Pods held above which most ADDs turn into DELs (keeps the node near, not at, its limit). */
  softCap: number;
}

/** Draws an episode set-up from `seed` (warm-ENI, warm-IP or prefix mode; small timers). */
export function randomEpisodeConfig(seed: number, ops: number, mode: DaemonMode): EpisodeConfig {
  const r = prng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
  const kind = r();
  const targets: Record<string, string> =
    kind < 0.3
      ? { WARM_ENI_TARGET: String(int(0, 1)) }
      : kind < 0.85
        ? { WARM_IP_TARGET: String(int(1, 5)), MINIMUM_IP_TARGET: String(int(0, 8)) }
        : { ENABLE_PREFIX_DELEGATION: 'true', WARM_PREFIX_TARGET: '1' };
  const instanceType = r() < 0.4 ? 't3.medium' : 'm5.large';
  return {
    seed,
    ops,
    mode,
    instanceType,
    env: {
      ...targets,
      ENI_IPAM_POOL_INTERVAL: `${int(20, 50)}ms`,
      ENI_IPAM_SHRINK_DELAY: `${int(0, 60)}ms`,
      IP_COOLDOWN_PERIOD: `${int(0, 200)}ms`,
      ENI_IPAM_ADD_WAIT_TIMEOUT: '1s',
      ENI_IPAM_RECONCILE_INTERVAL: `${int(100, 300)}ms`,
      ENI_IPAM_GC_INTERVAL: `${int(100, 300)}ms`,
      ENI_IPAM_GC_GRACE: '1s',
    },
    maxLatencyMs: int(0, 25),
    imdsLagMs: int(0, 250),
    maxInFlight: int(1, 8),
    softCap: instanceType === 't3.medium' ? int(3, 12) : int(4, 24),
  };
}

/** What an episode did and found. */
export interface EpisodeResult {
  config: EpisodeConfig;
  /** Operations run, by kind. */
  ops: Record<string, number>;
  addsOk: number;
  /** Failed ADDs by gRPC status name. */
  addErrors: Record<string, number>;
  restarts: number;
  /** EC2 release calls made (Unassign/Detach/Delete), ok or not. */
  releaseCalls: number;
  /** Prefix mode was asked for but this build refuses it (the episode ran in IP mode). */
  prefixRefused: boolean;
  violations: string[];
  ms: number;
}

type Op = 'add' | 'del' | 'delBurst' | 'readd' | 'delUnknown' | 'tick' | 'reconcile' | 'restart';
const WEIGHTS: Array<[Op, number]> = [
  ['add', 36],
  ['del', 28],
  ['delBurst', 2],
  ['readd', 6],
  ['delUnknown', 2],
  ['tick', 16],
  ['reconcile', 3],
  ['restart', 1.2],
];
const CLEAR_ERRORS = new Set<number>([grpc.status.RESOURCE_EXHAUSTED, grpc.status.UNAVAILABLE]);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs one episode. Never throws for a property violation (it is in `violations`); cleans up everything. */
export async function runEpisode(cfg: EpisodeConfig): Promise<EpisodeResult> {
  const t0 = Date.now();
  const r = prng(cfg.seed ^ 0x5eed);
  const res: EpisodeResult = {
    config: cfg,
    ops: {},
    addsOk: 0,
    addErrors: {},
    restarts: 0,
    releaseCalls: 0,
    prefixRefused: false,
    violations: [],
    ms: 0,
  };
  const bad = (s: string) => {
    if (res.violations.length < 50) res.violations.push(s);
  };
  const sim = new SimCloud({ seed: cfg.seed });
  await sim.start();
  let node: SimNode | undefined;
  let client: TestIpamdClient | undefined;
  try {
    const subnet = sim.addSubnet({ cidr: '10.0.0.0/24' });
    sim.faults.setLatency('*', { min: 0, max: cfg.maxLatencyMs });
    for (const k of ['assign', 'unassign', 'attach'] as const) sim.faults.setImdsLag(k, cfg.imdsLagMs);
    node = await createSimNode({
      sim,
      subnetId: subnet.subnetId,
      instanceType: cfg.instanceType,
      env: cfg.env,
      mode: cfg.mode,
    });
    try {
      await node.start();
    } catch (e) {
      if (cfg.env.ENABLE_PREFIX_DELEGATION !== 'true' || !/PREFIX/i.test((e as Error).message)) throw e;
      res.prefixRefused = true; // this build refuses prefix delegation: run the episode in IP mode
      await node.close();
      const env: Record<string, string> = { ...cfg.env, WARM_IP_TARGET: '3', MINIMUM_IP_TARGET: '4' };
      delete env.ENABLE_PREFIX_DELEGATION;
      delete env.WARM_PREFIX_TARGET;
      node = await createSimNode({
        sim,
        subnetId: subnet.subnetId,
        instanceType: cfg.instanceType,
        env,
        mode: cfg.mode,
      });
      await node.start();
    }
    const n = node;
    client = ipamdClient(n.socket);
    const c = client;
    const attachmentEni = new Map<string, string>();
    const noteAttachments = () => {
      for (const e of sim.state.enis.values())
        if (e.attachment) attachmentEni.set(e.attachment.attachmentId, e.networkInterfaceId);
    };
    const holds: Hold[] = [];
    const held = new Map<string, Hold>();
    const busy = new Set<string>();
    const inflight = new Set<Promise<void>>();
    let seq = 0;
    const fire = (p: Promise<void>) => {
      const q = p.finally(() => inflight.delete(q));
      inflight.add(q);
    };
    const drain = async () => {
      while (inflight.size) await Promise.all([...inflight]);
    };
    const pickHeld = () => {
      const ids = [...held.keys()].filter((id) => !busy.has(id));
      return ids.length ? ids[Math.floor(r() * ids.length)] : undefined;
    };
    const onOurEni = (ip: string) =>
      [...sim.state.enis.values()].some(
        (e) =>
          e.attachment?.instanceId === n.instanceId &&
          (e.secondaryIps.includes(ip) || e.ipv4Prefixes.some((p) => inCidr(ip, p))),
      );

    /** Diagnostics for a failure message: where EC2 has the IP now, and the last release call naming it. */
    const whereIs = (ip: string) => {
      const eni = [...sim.state.enis.values()].find(
        (e) => e.secondaryIps.includes(ip) || e.ipv4Prefixes.some((p) => inCidr(ip, p)),
      );
      const last = sim.calls
        .filter((x) => x.action === 'UnassignPrivateIpAddresses' && Object.values(x.params).includes(ip))
        .at(-1);
      return (
        `(EC2 now: ${eni ? `${eni.networkInterfaceId} ${eni.status} attachment ${eni.attachment?.status ?? 'none'}` : 'on no ENI'}; ` +
        `last Unassign of it: ${last ? `${new Date(last.at).toISOString()} +${last.durationMs ?? '∞'} ms ${last.ok ? 'ok' : (last.errorCode ?? 'in flight')}` : 'none'}; now ${new Date().toISOString()})`
      );
    };
    const add = async (id: string) => {
      busy.add(id);
      n.cri?.add({ id, name: `pod-${id}`, namespace: 'default', uid: `uid-${id}` });
      try {
        const rep = await c.add(id);
        const at = Date.now();
        noteAttachments();
        if (!rep.success || !rep.ipv4_addr) {
          bad(`ADD ${id}: success=${rep.success} with no IP (${rep.message})`);
          return;
        }
        const other = [...held.values()].find((h) => h.ip === rep.ipv4_addr && h.to === Infinity);
        if (other) bad(`ADD ${id} got ${rep.ipv4_addr}, which live pod ${other.containerId} holds`);
        if (!onOurEni(rep.ipv4_addr))
          bad(
            `ADD ${id} got ${rep.ipv4_addr} from ${rep.eni_id}, which EC2 does not show on an ENI attached to ${n.instanceId} ${whereIs(rep.ipv4_addr)}`,
          );
        const h: Hold = { containerId: id, ip: rep.ipv4_addr, eniId: rep.eni_id, from: at, to: Infinity };
        holds.push(h);
        held.set(id, h);
        n.cri?.setIp(id, rep.ipv4_addr);
        res.addsOk++;
      } catch (e) {
        const g = e as GrpcError;
        const name = grpc.status[g.code] ?? String(g.code);
        res.addErrors[name] = (res.addErrors[name] ?? 0) + 1;
        if (!CLEAR_ERRORS.has(g.code) || (g.details ?? '').trim().length < 10)
          bad(`ADD ${id} failed without a clear reason: ${name}: ${JSON.stringify(g.details ?? g.message)}`);
        // As containerd does: a failed ADD is followed by a DEL, then the sandbox goes.
        await c
          .del(id, { reason: 'add-failed' })
          .catch((d: GrpcError) => bad(`DEL after a failed ADD of ${id} failed: ${d.details ?? d.message}`));
        n.cri?.remove(id);
      } finally {
        busy.delete(id);
      }
    };
    const del = async (id: string) => {
      const h = held.get(id)!;
      busy.add(id);
      h.to = Date.now();
      try {
        // containerd's StopPodSandbox tears the network down (CNI DEL) while the sandbox is
        // still READY, and only then stops it: the sandbox leaves the runtime after the reply.
        const rep = await c.del(id);
        if (!rep.released || rep.ipv4_addr !== h.ip)
          bad(`DEL ${id} (holding ${h.ip}) answered released=${rep.released} ip=${rep.ipv4_addr}`);
        held.delete(id);
        n.cri?.remove(id);
      } catch (e) {
        h.to = Infinity;
        bad(`DEL ${id} failed: ${(e as GrpcError).details ?? (e as Error).message}`);
      } finally {
        busy.delete(id);
      }
    };
    const readd = async (id: string, why: string) => {
      const h = held.get(id)!;
      busy.add(id);
      try {
        const rep = await c.add(id);
        if (rep.ipv4_addr !== h.ip) bad(`repeated ADD of ${id} ${why} returned ${rep.ipv4_addr}, it holds ${h.ip}`);
      } catch (e) {
        bad(`repeated ADD of ${id} ${why} failed: ${(e as GrpcError).details ?? (e as Error).message}`);
      } finally {
        busy.delete(id);
      }
    };

    const total = WEIGHTS.reduce((s, [, w]) => s + w, 0);
    const pick = (): Op => {
      let x = r() * total;
      for (const [op, w] of WEIGHTS) {
        if ((x -= w) < 0) return op;
      }
      return 'add';
    };
    const poolMs = parseInt(cfg.env.ENI_IPAM_POOL_INTERVAL ?? '50', 10);
    const shrinkMs = parseInt(cfg.env.ENI_IPAM_SHRINK_DELAY ?? '50', 10);
    for (let k = 0; k < cfg.ops; k++) {
      let op = pick();
      if (op === 'add' && held.size >= cfg.softCap && r() < 0.75) op = 'del';
      res.ops[op] = (res.ops[op] ?? 0) + 1;
      if (op === 'add') fire(add(`p${cfg.seed.toString(36)}-${seq++}`));
      else if (op === 'del' || op === 'readd') {
        const id = pickHeld();
        if (id) fire(op === 'del' ? del(id) : readd(id, 'while held'));
      } else if (op === 'delBurst') {
        // Several pods go at once (a deployment scaled down): the surplus the shrink path acts on.
        for (let b = 1 + Math.floor(r() * 6); b > 0; b--) {
          const id = pickHeld();
          if (id) fire(del(id));
        }
      } else if (op === 'delUnknown') {
        fire(
          c.del(`never-${seq++}`).then(
            (rep) => {
              if (rep.released) bad(`DEL of an unknown key released ${rep.ipv4_addr}`);
            },
            (e: GrpcError) => bad(`DEL of an unknown key failed: ${e.details}`),
          ),
        );
      } else if (op === 'tick') {
        await sleep(Math.floor(r() * (shrinkMs + 2 * poolMs)));
      } else if (op === 'reconcile') {
        const before = (await n.status()).evidence?.passes ?? 0;
        const until = Date.now() + 300;
        while (Date.now() < until && ((await n.status()).evidence?.passes ?? 0) <= before) await sleep(15);
      } else if (op === 'restart') {
        await drain();
        await n.stop({ crash: cfg.mode === 'child' && r() < 0.5 });
        res.restarts++;
        await n.start();
        const sample = [...held.keys()].sort(() => r() - 0.5).slice(0, 4);
        await Promise.all(sample.map((id) => readd(id, 'after a restart')));
      }
      if (inflight.size >= cfg.maxInFlight) await Promise.race([...inflight]);
    }
    await drain();
    // ipamd's own count converges to the pods held (the GC releases nothing a pod holds).
    let assigned = -1;
    for (let i = 0; i < 40 && assigned !== held.size; i++) {
      assigned = (await n.status()).counts?.assigned ?? -1;
      if (assigned !== held.size) await sleep(50);
    }
    if (assigned !== held.size) bad(`ipamd reports ${assigned} assigned IPs, the test holds ${held.size} pods`);
    for (const h of held.values())
      if (!onOurEni(h.ip)) bad(`held IP ${h.ip} (${h.containerId}) is on no ENI attached to the instance at the end`);
    await n.stop();
    noteAttachments();
    const calls = sim.calls.filter((x) => !x.instanceId || x.instanceId === n.instanceId);
    res.releaseCalls = calls.filter((x) =>
      ['UnassignPrivateIpAddresses', 'DetachNetworkInterface', 'DeleteNetworkInterface'].includes(x.action),
    ).length;
    for (const v of auditReleases({ holds, calls, attachmentEni })) bad(v);
  } catch (e) {
    bad(`episode aborted: ${(e as Error).stack ?? String(e)}`);
  } finally {
    client?.close();
    await node?.close();
    await sim.stop();
    res.ms = Date.now() - t0;
  }
  return res;
}
