/**
 * The outage bench of docs/design.md#13-evidence-before-trust: one containerd node (containerd-node.ts, ipamd inside the
 * node namespace beside the pods' veths) plus a second, healthy, usually empty runtime on
 * the same node (second-runtime.ts), shared by several scenarios of a test file.
 *
 * A scenario is: {@link OutageBench.prepare} (12 live pods on at least 2 ENIs, ipamd
 * healthy), a restart of ipamd with one source wrong ({@link OutageBench.restart}),
 * {@link OutageBench.observe} (a damage window as long as the shortened GC, cooldown,
 * shrink and ENI-age periods need to act, then new pods through the right runtime, then the
 * figures), {@link checkSafety}, and {@link OutageBench.recover} (ipamd restarted with
 * the right sources, the nothing-lost check). `prepare` reuses the pods of the previous
 * scenario when it recovered, and rebuilds the node's pods from scratch when it did not
 * (a scenario that failed may leave released IPs, deleted ENIs and duplicate IPs behind).
 *
 * `family: 'ipv6'` runs the same bench in IPv6 mode (outage-v6.ts): pods get /128s from the
 * node's /80 and egress IPv4s, releases are ipamd's own (logged) or UnassignIpv6Addresses,
 * and the nothing-lost check reads ipamd's IPv6 checkpoint.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import {
  createContainerdNode,
  NODE_NAME,
  type ContainerdNode,
  type IpamdStatus,
  type RunningPod,
} from '../../kit/containerd-node.js';
import { listParam, RELEASE_ACTIONS, releaseCallsSince, type LiveSandbox } from '../../kit/nothing-lost.js';
import { duplicateIps, type OutageFigures } from './outage-checks.js';
import { startSecondRuntime, type SecondRuntime } from './second-runtime.js';
import { waitFor } from '../../kit/wait.js';
import { ipv6CheckpointPath } from '../../ipamd/checkpoint/ipv6-file.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  assertNothingLostV6,
  assertV6Pods,
  duplicateV6,
  IPV6_MODE_ENV,
  IPV6_PLUGIN_CONFIG,
  liveV6Releases,
  readV6Pods,
} from './outage-v6.js';

export { checkSafety, duplicateIps, figureLine, type OutageFigures } from './outage-checks.js';

/**
 * ipamd's environment for the outage: GC, grace, cooldown, shrink and ENI age shortened to
 * seconds (with the defaults the same releases happen, minutes later); WARM_IP_TARGET=2 so
 * 12 pods span 2 ENIs of an m5.large (9 secondary IPs each) and any release is surplus.
 */
export const OUTAGE_ENV: NodeJS.ProcessEnv = {
  WARM_IP_TARGET: '2',
  IP_COOLDOWN_PERIOD: '1s',
  ENI_IPAM_SHRINK_DELAY: '1s',
  ENI_IPAM_MIN_ENI_AGE: '1s',
  ENI_IPAM_GC_INTERVAL: '1s',
  ENI_IPAM_GC_GRACE: '2s',
  ENI_IPAM_POOL_INTERVAL: '200ms',
  // With ENI_IPAM_FAST_RESTART, releases wait for EC2's confirm after a restart: within the damage window.
  ENI_IPAM_RESTART_CONFIRM_JITTER: '500ms',
};
/** Live pods each scenario starts from. */
export const LIVE_PODS = 12;
/**
 * How long after a restart the bench waits before it starts new pods (ms), and the fewest
 * evidence passes in that time: on the unfixed build the first pass released every live
 * allocation, and the ENI holding 3 live pods was detached and deleted 4.3 s after the
 * restart (GC 1 s + cooldown 1 s + shrink delay 1 s + ENI age 1 s + EC2 round trips).
 */
export const DAMAGE_WINDOW_MS = 7000;
export const DAMAGE_WINDOW_PASSES = 4;

/** Where EC2 held an IP: its ENI and that ENI's attachment. */
type Placement = Map<string, { eniId: string; attachmentId?: string }>;

/** Options of {@link OutageBench.create}. */
export interface OutageBenchOptions {
  /** `ipv6`: IPv6 mode (see the module docstring). Default `ipv4`. */
  family?: 'ipv4' | 'ipv6';
  /** Live pods each scenario starts from (default {@link LIVE_PODS}; IPv4 needs ≥ 10 to span 2 ENIs). */
  livePods?: number;
}

/** The bench; see the module docstring. */
export class OutageBench {
  /** The pods every scenario starts from. */
  baseline: RunningPod[] = [];
  /** Pods published in the stand-in that no sandbox backs (a lying API), by `namespace/name`. */
  private readonly ghosts = new Set<string>();
  private healthy = false;
  private placement: Placement = new Map();
  private sinceCall = 0;
  /** When the last {@link restart} had ipamd serving, and when it started it (ms since epoch). */
  servedAt = 0;
  private restartedAt = 0;

  private constructor(
    readonly n: ContainerdNode,
    readonly wrong: SecondRuntime,
    readonly family: 'ipv4' | 'ipv6',
    readonly livePods: number,
  ) {}

  /** Builds the node and the second runtime (nothing runs yet). @throws Error when a part does not start. */
  static async create(o: OutageBenchOptions = {}): Promise<OutageBench> {
    const v6 = o.family === 'ipv6';
    const n = await createContainerdNode({
      ipamdEnv: v6 ? { ...OUTAGE_ENV, ...IPV6_MODE_ENV } : OUTAGE_ENV,
      ipamdInNodeNetns: true,
      startIpamd: false,
      ...(v6 ? { vpc: { ipv6: true }, pluginConfig: IPV6_PLUGIN_CONFIG } : {}),
    });
    try {
      // The node routes the pods' /128s (as the init container's sysctls do on a real node).
      if (v6)
        await promisify(execFile)('nsenter', [
          `--net=${n.nodeNetns.path}`,
          'sysctl',
          '-q',
          '-w',
          'net.ipv6.conf.all.forwarding=1',
        ]);
      const wrong = await startSecondRuntime({ dir: path.join(n.dir, 'second'), nodeNetnsPath: n.nodeNetns.path });
      return new OutageBench(n, wrong, o.family ?? 'ipv4', o.livePods ?? LIVE_PODS);
    } catch (e) {
      await n.close();
      throw e;
    }
  }

  /** Stops everything (ipamd, both runtimes and their sandboxes, netns, sim, stand-in). */
  async close(): Promise<void> {
    await this.n.stopIpamd().catch(() => undefined);
    await this.wrong.close().catch(() => undefined);
    await this.n.close();
  }

  /**
   * Brings the node to the scenario start: ipamd running with the right sources, the
   * stand-in truthful, no foreign sandbox, exactly the {@link LIVE_PODS} baseline pods.
   * @returns the baseline pods.
   */
  async prepare(): Promise<RunningPod[]> {
    const { n } = this;
    await this.wrong.removeAll();
    if (this.healthy && n.ipamd) {
      this.healthy = false;
      for (const p of [...n.pods.values()]) if (!this.baseline.some((b) => b.id === p.id)) await n.removePod(p.id);
      this.baseline = this.baseline.filter((b) => n.pods.has(b.id));
      return this.topUp();
    }
    this.healthy = false;
    await n.killIpamd();
    for (const sb of await n.cri.listPodSandbox()) {
      await n.cri.stopPodSandbox(sb.id).catch(() => undefined);
      await n.cri.removePodSandbox(sb.id).catch(() => undefined);
    }
    for (const p of n.pods.values()) n.kube.deletePod(p.namespace, p.name);
    n.pods.clear();
    this.tellTheTruth();
    await this.removeCheckpoints();
    await n.startIpamd();
    await waitFor(
      'ipamd healthy after a reset',
      async () => {
        const s = await n.status();
        return s.evidence.passes >= 1 && !s.releasesFrozen;
      },
      30_000,
      100,
    );
    this.baseline = [];
    return this.topUp();
  }

  /** Both checkpoints (IPv4 and IPv6) removed. */
  private async removeCheckpoints(): Promise<void> {
    await rm(this.n.checkpoint, { force: true });
    await rm(ipv6CheckpointPath(this.n.checkpoint), { force: true });
  }

  /** Runs pods (4 at a time) until the baseline has `livePods`; checks they span 2 ENIs (IPv6: the pods' checks). */
  private async topUp(): Promise<RunningPod[]> {
    const { n } = this;
    while (this.baseline.length < this.livePods) {
      const k = Math.min(4, this.livePods - this.baseline.length);
      this.baseline.push(
        ...(await Promise.all(Array.from({ length: k }, () => n.runPod(`live-${randomUUID().slice(0, 6)}`)))),
      );
    }
    if (this.family === 'ipv6') return assertV6Pods(n, this.baseline);
    const enis = new Set(this.baseline.map((p) => this.eniOf(p.ip)));
    assert.ok(
      enis.size >= 2 && !enis.has(undefined),
      `the ${LIVE_PODS} live pods span 2 ENIs: ${JSON.stringify(this.baseline.map((p) => [p.ip, this.eniOf(p.ip)]))}`,
    );
    return this.baseline;
  }

  /** The ENI holding `ip` in the simulated EC2 now. */
  eniOf(ip: string): string | undefined {
    for (const e of this.n.sim.state.enis.values()) if (e.secondaryIps.includes(ip)) return e.networkInterfaceId;
    return undefined;
  }

  /**
   * Restarts ipamd with `extra` over its base environment (`undefined` unsets a variable):
   * SIGTERM unless it is already down (killed), the checkpoint deleted if asked. Remembers
   * where EC2 holds every live IP and where the call log stands, for {@link observe}.
   */
  async restart(extra: NodeJS.ProcessEnv, o: { deleteCheckpoint?: boolean } = {}): Promise<void> {
    const { n } = this;
    await n.stopIpamd();
    this.placement = new Map();
    for (const e of n.sim.state.enis.values()) {
      for (const ip of e.secondaryIps)
        this.placement.set(ip, {
          eniId: e.networkInterfaceId,
          ...(e.attachment ? { attachmentId: e.attachment.attachmentId } : {}),
        });
    }
    this.sinceCall = n.sim.calls.length;
    if (o.deleteCheckpoint) await this.removeCheckpoints();
    this.restartedAt = Date.now();
    await n.startIpamd(extra);
    this.servedAt = Date.now();
  }

  /**
   * After a {@link restart}: waits until {@link DAMAGE_WINDOW_MS} after it and {@link DAMAGE_WINDOW_PASSES}
   * evidence passes (recording every freeze reason shown), starts `newPods` pods through the
   * right runtime (as kubelet would; a failed RunPodSandbox is recorded, not thrown), waits
   * one more pass and returns the figures.
   */
  async observe(scenario: string, newPods = 4): Promise<OutageFigures> {
    const { n } = this;
    const t0 = this.servedAt;
    const seen = new Set<string>();
    const note = (s: IpamdStatus): IpamdStatus => {
      for (const r of s.freezeReasons) seen.add(r);
      return s;
    };
    await waitFor(
      `${DAMAGE_WINDOW_MS} ms and ${DAMAGE_WINDOW_PASSES} evidence passes after the restart`,
      async () => {
        const s = note(await n.status());
        return s.evidence.passes >= DAMAGE_WINDOW_PASSES && Date.now() - t0 >= DAMAGE_WINDOW_MS;
      },
      60_000,
      100,
    );
    const started: string[] = [];
    const failed: string[] = [];
    for (let i = 0; i < newPods; i += 2) {
      await Promise.all(
        [i, i + 1]
          .filter((k) => k < newPods)
          .map(async (k) => {
            const name = `${scenario}-new-${k}`;
            started.push(name);
            await n.runPod(name).catch((e: Error) => {
              failed.push(`${name}: ${e.message.split('\n')[0]}`);
            });
          }),
      );
    }
    const passes = note(await n.status()).evidence.passes;
    const last = await waitFor(
      'one more evidence pass',
      async () => {
        const s = note(await n.status());
        return s.evidence.passes > passes ? s : undefined;
      },
      30_000,
      100,
    );
    const live = await n.liveSandboxes();
    const v6 = this.family === 'ipv6' ? await readV6Pods(n) : undefined;
    const hit = v6 ? await liveV6Releases(n, v6, this.restartedAt, this.sinceCall) : this.liveReleaseCalls(live);
    return {
      scenario,
      releaseCalls: releaseCallsSince(n.sim.calls, this.sinceCall),
      liveReleaseCalls: hit.calls,
      livePodsHit: hit.pods.size,
      duplicateIps: v6 ? duplicateV6(v6) : duplicateIps(live),
      newPods: started,
      failedNewPods: failed,
      frozen: last.releasesFrozen,
      reasons: last.freezeReasons,
      reasonsSeen: [...seen],
    };
  }

  /** Release calls since the restart that took a live pod's IP (or the /28 holding it) or the ENI holding one. */
  private liveReleaseCalls(live: LiveSandbox[]): { calls: string[]; pods: Set<string> } {
    const place: Placement = new Map(this.placement);
    for (const e of this.n.sim.state.enis.values()) {
      for (const ip of e.secondaryIps)
        if (!place.has(ip))
          place.set(ip, {
            eniId: e.networkInterfaceId,
            ...(e.attachment ? { attachmentId: e.attachment.attachmentId } : {}),
          });
    }
    const out: string[] = [];
    const pods = new Set<string>();
    for (const c of this.n.sim.calls.slice(this.sinceCall)) {
      if (!(RELEASE_ACTIONS as readonly string[]).includes(c.action)) continue;
      const hit = live.filter(
        (s) =>
          c.at >= s.createdAtMs &&
          ((c.action === 'UnassignPrivateIpAddresses' && listParam(c.params, 'PrivateIpAddress').includes(s.ip)) ||
            (c.action === 'DetachNetworkInterface' && place.get(s.ip)?.attachmentId === c.params['AttachmentId']) ||
            (c.action === 'DeleteNetworkInterface' && place.get(s.ip)?.eniId === c.params['NetworkInterfaceId'])),
      );
      for (const s of hit) pods.add(s.id);
      if (hit.length)
        out.push(
          `${c.action} ${c.params['NetworkInterfaceId'] ?? c.params['AttachmentId'] ?? ''} took live ${hit.map((s) => `${s.podName}=${s.ip}`).join(', ')}`,
        );
    }
    return { calls: out, pods };
  }

  /** Removes every pod of `NODE_NAME` from the stand-in (the API lists none of the live pods). */
  hidePods(): void {
    this.n.publishPods = false;
    for (const p of this.n.pods.values()) this.n.kube.deletePod(p.namespace, p.name);
  }

  /** Makes the stand-in list `count` pods on `nodeName` that no sandbox backs (IPs outside every ENI). */
  addGhostPods(nodeName: string, count: number): void {
    for (let i = 0; i < count; i++) {
      const name = `ghost-${nodeName}-${i}`;
      this.ghosts.add(`ghosts/${name}`);
      this.n.kube.upsertPod({
        namespace: 'ghosts',
        name,
        uid: randomUUID(),
        nodeName,
        podIP: `192.168.77.${i + 10}`,
        containerID: randomUUID().replace(/-/g, ''),
      });
    }
  }

  /** The stand-in lists exactly the pods that run, and runPod publishes again. */
  tellTheTruth(): void {
    const { n } = this;
    for (const g of this.ghosts) {
      const [ns, name] = g.split('/') as [string, string];
      n.kube.deletePod(ns, name);
    }
    this.ghosts.clear();
    n.publishPods = true;
    for (const p of n.pods.values())
      n.kube.upsertPod({
        namespace: p.namespace,
        name: p.name,
        uid: p.uid,
        nodeName: NODE_NAME,
        podIP: p.ip,
        containerID: p.id,
      });
  }

  /**
   * Fixes the configuration (ipamd restarted with its base environment, the stand-in
   * truthful), waits for the freeze to lift and runs the nothing-lost check (IPv6: outage-v6.ts).
   * @throws AssertionError listing what was lost.
   */
  async recover(): Promise<void> {
    const { n } = this;
    this.tellTheTruth();
    await this.wrong.removeAll();
    await n.restartIpamd();
    let reasons: string[] = [];
    await waitFor(
      'the freeze to lift with the right sources',
      async () => {
        const s = await n.status();
        reasons = s.freezeReasons;
        return s.evidence.passes >= 1 && !s.releasesFrozen;
      },
      30_000,
      100,
    ).catch((e: Error) => {
      throw new Error(`${e.message}; still frozen: ${reasons.join('; ')}`);
    });
    await (this.family === 'ipv6' ? assertNothingLostV6(n) : n.assertNothingLost());
    this.healthy = true;
  }
}
