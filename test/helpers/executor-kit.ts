/**
 * The executors' unit-test kit: the real controller parts (datastore, release gate, ENI
 * manager, grow/shrink executors, ENI reconcile, leaked-ENI sweep) wired to the
 * simulator's EC2 model in-process ({@link MemoryEc2}: no HTTP) and to one virtual clock
 * (`now` and every poll's sleep advance it; nothing waits on the wall clock).
 *
 * The node: one instance (default m5.large: 3 ENIs, 10 IPv4 slots each, so 9 secondary
 * IPs per ENI) in a /24 subnet, its primary ENI in the datastore as ipamd's start-up puts it.
 */
import pino from 'pino';
import { Datastore } from '../../ipamd/datastore/datastore.js';
import { instanceTypeInfo } from '../../ipamd/cloud/instance-types.js';
import { EniManager } from '../../ipamd/controller/eni-lifecycle/eni-manager.js';
import { EniReconciler } from '../../ipamd/controller/eni-lifecycle/eni-reconcile.js';
import { LeakedEniSweeper } from '../../ipamd/controller/eni-lifecycle/leak-sweep.js';
import { GrowExecutor, type GrowExecutorOptions } from '../../ipamd/controller/pool-loop/grow-executor.js';
import { SubnetPlacement } from '../../ipamd/controller/eni-lifecycle/subnet-placement-source.js';
import { ShrinkExecutor } from '../../ipamd/controller/pool-loop/shrink-executor.js';
import { ReleaseGate } from '../../ipamd/controller/release/release-gate.js';
import { SurplusTracker, type PoolTargets } from '../../ipamd/pool/index.js';
import { MemoryEc2 } from '../../sim/memory-ec2.js';
import type { Eni } from '../../sim/types.js';

/** Start of virtual time (ms since the epoch). */
export const T0 = Date.parse('2026-01-01T00:00:00Z');

/** Options of {@link executorKit}. */
export interface KitOptions {
  instanceType?: string;
  /** The node subnet's CIDR (default 10.0.0.0/24). */
  subnetCidr?: string;
  /** Pool targets (default warm-ip: WARM_IP_TARGET=2). `maxEni` defaults to the type's limit. */
  targets?: Partial<PoolTargets>;
  /** Address cooldown after release (ms, default 0). */
  cooldownMs?: number;
  /** ENI_IPAM_SHRINK_DELAY (ms, default 1 000). */
  shrinkDelayMs?: number;
  /** Minimum ENI age before it may be freed (ms, default 60 000). */
  minEniAgeMs?: number;
  /** IMDS lists nothing (default: it lists what EC2 shows attached). */
  imdsBlind?: boolean;
  /** Custom networking: false = the primary ENI serves no new pod (default true). */
  primaryServesNewPods?: boolean;
  /** Custom networking: why no ENI may be created now (GrowExecutorOptions.eniCreationRefused). */
  eniCreationRefused?: GrowExecutorOptions['eniCreationRefused'];
  /**
   * ENABLE_SUBNET_DISCOVERY: new ENIs go by a {@link SubnetPlacement} over the model's
   * subnets (add and tag them with `ec2.addSubnet`); default: the node subnet only.
   */
  discovery?: boolean;
  /** The virtual clock to share (e.g. a `VirtualTime` whose timers the pool controller runs on); default a private one from {@link T0}. */
  clock?: { now(): number; advance(ms: number): void };
}

/** A node's controller parts over the in-memory EC2. */
export function executorKit(o: KitOptions = {}) {
  let t = T0;
  const clock = o.clock ?? {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
  const sleep = (ms: number): Promise<void> => {
    clock.advance(ms);
    return Promise.resolve();
  };
  const ec2 = new MemoryEc2({ clock });
  const subnet = ec2.addSubnet(o.subnetCidr ?? '10.0.0.0/24');
  const instanceType = o.instanceType ?? 'm5.large';
  const inst = ec2.launchInstance(instanceType, subnet.subnetId);
  const type = instanceTypeInfo(instanceType)!;
  const ipsPerEni = type.ipv4PerEni - 1;
  const unit = o.targets?.unit ?? 'ip';
  const targets: PoolTargets = { warmEniTarget: 0, maxEni: type.maxEnis, ...(o.targets ?? { warmIpTarget: 2 }) };
  const log = pino({ level: 'silent' });
  const ds = new Datastore(o.cooldownMs ?? 0, unit, { primaryServesNewPods: o.primaryServesNewPods ?? true });
  const primary = ec2.state.enis.get(inst.primaryEniId)!;
  ds.upsertEni({
    eniId: primary.networkInterfaceId,
    mac: primary.macAddress,
    deviceNumber: 0,
    subnetId: subnet.subnetId,
    subnetCidr: subnet.cidr,
    primaryIp: primary.primaryIp,
    isPrimary: true,
    createdAtMs: T0 - 3600_000,
    capacity: ipsPerEni,
  });
  const gate = new ReleaseGate();
  let imdsDown = false;
  const imds = {
    eniAddresses: async () => {
      if (imdsDown || o.imdsBlind) throw new Error('IMDS unreachable');
      return ec2.imdsEnis(inst.instanceId);
    },
  };
  const enis = new EniManager({
    ec2,
    ds,
    gate,
    log,
    additionalTags: {},
    unmanagedDeviceIndexes: new Set(),
    imds,
    now: clock.now,
    sleep,
    instance: {
      instanceId: inst.instanceId,
      subnetId: subnet.subnetId,
      subnetCidr: subnet.cidr,
      securityGroupIds: [],
      maxEnis: type.maxEnis,
      ipsPerEni,
    },
    ...(o.discovery
      ? {
          placement: new SubnetPlacement({
            ec2,
            node: {
              subnetId: subnet.subnetId,
              cidr: subnet.cidr,
              vpcId: ec2.state.vpcId,
              availabilityZone: subnet.availabilityZone,
              securityGroupIds: ['sg-primary'],
            },
            discovery: true,
            log,
            now: clock.now,
          }),
        }
      : {}),
  });
  let creationsDone = 0;
  const grower = new GrowExecutor({
    ds,
    ec2,
    enis,
    log,
    targets,
    now: clock.now,
    onCreationDone: () => {
      creationsDone++;
    },
    ...(o.eniCreationRefused ? { eniCreationRefused: o.eniCreationRefused } : {}),
  });
  const shrinker = new ShrinkExecutor({
    ds,
    ec2,
    enis,
    gate,
    log,
    targets,
    surplus: new SurplusTracker(),
    shrinkDelayMs: o.shrinkDelayMs ?? 1000,
    minEniAgeMs: o.minEniAgeMs ?? 60_000,
    now: clock.now,
  });
  let triggers = 0;
  const reconciler = new EniReconciler({
    ec2,
    imds,
    ds,
    enis,
    log,
    instanceId: inst.instanceId,
    intervalMs: 60_000,
    now: clock.now,
    pool: {
      exclusive: (fn) => fn(),
      trigger: () => {
        triggers++;
      },
    },
  });
  const sweeper = new LeakedEniSweeper({
    ec2,
    gate,
    log,
    instanceId: inst.instanceId,
    vpcId: ec2.state.vpcId,
    intervalMs: 3600_000,
    jitterMs: 0,
    isBusy: (id) => enis.isBusy(id),
    now: clock.now,
  });
  let pods = 0;
  return {
    clock,
    ec2,
    ds,
    gate,
    enis,
    grower,
    shrinker,
    reconciler,
    sweeper,
    targets,
    ipsPerEni,
    log,
    instanceId: inst.instanceId,
    primaryEniId: inst.primaryEniId,
    subnetId: subnet.subnetId,
    /** ENI creations finished (either way) so far. */
    get creationsDone() {
      return creationsDone;
    },
    /** Pool steps the reconcile asked for. */
    get triggers() {
      return triggers;
    },
    /** The IMDS ENI lister the ENI manager and the reconcile read (replace `enis` to change what IMDS says). */
    imds,
    /** Makes IMDS unreadable (true) or readable again. */
    imdsDown(down: boolean) {
      imdsDown = down;
    },
    /** Assigns one address to a new pod; @returns its IP. @throws when the pool is empty. */
    addPod(): string {
      const r = ds.assign(
        { networkName: 'aws-cni', containerID: `c${++pods}`, ifName: 'eth0' },
        undefined,
        clock.now(),
      );
      if (r.kind !== 'assigned') throw new Error(`no address: ${r.kind}`);
      return r.allocation.ipv4;
    },
    /** Releases the pod holding `containerID` (`c<n>`, in order of addPod). */
    delPod(containerID: string): void {
      ds.unassign({ networkName: 'aws-cni', containerID, ifName: 'eth0' }, clock.now());
    },
    /** ENIs EC2 shows attached to the instance (the model's objects). */
    attached(): Eni[] {
      return [...ec2.state.enis.values()].filter((e) => e.attachment?.instanceId === inst.instanceId);
    },
    /** Every ENI of the model (attached or not). */
    allEnis(): Eni[] {
      return [...ec2.state.enis.values()];
    },
    /** Per ENI: addresses the datastore holds vs what EC2 shows (secondary IPs, or 16 per /28). */
    compare(): { ds: Record<string, number>; ec2: Record<string, number> } {
      const per = (e: Eni) => e.secondaryIps.length + 16 * e.ipv4Prefixes.length;
      return {
        ds: Object.fromEntries(ds.listEnis().map((e) => [e.eniId, ds.eniIps(e.eniId).length])),
        ec2: Object.fromEntries(
          this.attached()
            .filter((e) => ds.getEni(e.networkInterfaceId))
            .map((e) => [e.networkInterfaceId, per(e)]),
        ),
      };
    },
    /**
     * Fills the primary ENI: every secondary IP assigned on EC2, in the datastore and held
     * by a pod; the call log is emptied after. @returns the pods' IPs.
     */
    async fillPrimary(): Promise<string[]> {
      ds.addIps(inst.primaryEniId, await ec2.assignIps(inst.primaryEniId, ipsPerEni));
      ec2.calls.length = 0;
      return Array.from({ length: ipsPerEni }, () => this.addPod());
    },
    /** One grow pass and every ENI creation it launched. */
    async grow(waiting = 0) {
      const out = await grower.run(waiting);
      await grower.idle();
      return out;
    },
  };
}

/** The kit's type. */
export type ExecutorKit = ReturnType<typeof executorKit>;
