/**
 * The request path of a node in `ipv6` or `dual` mode (docs/design.md#ip-families), over
 * the IPv6 allocations (datastore/ipv6-allocations.ts) and, in `dual` mode, the IPv4
 * service: one key holds both families, assigned, released and looked up together.
 * Every change is durable (the IPv6 checkpoint, and the IPv4 one for the IPv4 half)
 * before it is answered; a change that cannot be made durable is undone.
 *
 * `dual` ADD assigns the IPv6 in memory, then takes the IPv4 (it may wait on a refill)
 * while the IPv6 is written; when either half fails, the other's new assignment is given
 * back, so a pod never gets one without the other. DEL
 * releases both or, when a write fails, neither is left half-released in memory (the DEL
 * is retried). A DEL that reached only the IPv4 datastore (the DEL spool, applied while
 * ipamd starts) releases the IPv6 half at the next {@link FamilyService.sweepReleased}.
 */
import { monoNow } from '../clock.js';
import type { IpFamilyMode } from '../../proto/ipam.js';
import { IpamdCause } from '../../proto/ipamd-cause.js';
import { v6KeyOf, type Ipv6Allocations, type V6Allocation } from '../datastore/ipv6-allocations.js';
import type { KernelReader } from '../restore/kernel-source.js';
import { keepWiredAndBrake } from './gc.js';
import type { AllocationKey, PodRef } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { PoolExhaustedError } from '../controller/pool-loop/pool-controller.js';
import type { AddRequest, AddResult, DelResult, IpamService } from './ipam-service.js';
import { IpamdFailure } from './ipamd-failure.js';
import type { WiredV6Adoption } from './v6-adopt.js';
import { stageTrace } from './stage-trace.js';

/** Options of {@link FamilyService}. */
export interface FamilyServiceOptions {
  mode: Exclude<IpFamilyMode, 'ipv4'>;
  v6: Ipv6Allocations;
  /** The IPv4 request path (`dual` mode's IPv4 half; unused in `ipv6` mode). */
  v4: IpamService;
  /** Makes the IPv6 allocations durable (ipamd/checkpoint/ipv6-file.ts). */
  persistV6: () => Promise<void>;
  log: Logger;
  /** Monotonic ms (cooldown). */
  now?: () => number;
  /** Clock stamped as `allocatedAt` (default monoNow: the IPv4 datastore's scale, so the two compare). */
  wallNow?: () => number;
  /**
   * The containers ipamd released on the IPv4 side (the datastore's remembered DELs: DEL,
   * GC, the DEL spool; `releasedAt` on monoNow's scale). Read by {@link FamilyService.sweepReleased}.
   */
  released?: () => ReadonlyArray<{ containerID: string; releasedAt: number }>;
  /** The node's kernel (restore's kernel source) for `ipv6` GC; without it the runtime's list is taken as is. */
  kernel?: KernelReader;
  /**
   * The start-up adoption of wired /128s no allocation holds (service/v6-adopt.ts): every
   * ADD waits for it and fails while the kernel is unreadable. Absent: no gate (unit tests).
   */
  adoption?: WiredV6Adoption;
}

/** A family-aware ADD's result: the IPv6 allocation and, in `dual` mode, the IPv4 one. */
export interface FamilyAddResult {
  v6: V6Allocation;
  v4?: AddResult;
  existing: boolean;
}

/** A family-aware DEL's result. */
export interface FamilyDelResult {
  released: boolean;
  v6?: V6Allocation;
  v4?: DelResult;
}

/** ADD/DEL/CHECK of a node serving IPv6 (see the module docstring). */
export class FamilyService {
  private readonly now: () => number;
  private readonly wallNow: () => number;

  constructor(private readonly o: FamilyServiceOptions) {
    this.now = o.now ?? monoNow;
    this.wallNow = o.wallNow ?? monoNow;
  }

  /** The mode served. */
  get mode(): Exclude<IpFamilyMode, 'ipv4'> {
    return this.o.mode;
  }

  /**
   * Assigns the key's addresses (idempotent), once the wired /128s are adopted.
   * @throws IpamdFailure (cause not-ready) while the adoption cannot read the kernel; what IpamService.add throws (`dual`); IpamdFailure (cause checkpoint) when the
   *   IPv6 half could not be made durable; PoolExhaustedError when the /80 or the
   *   egress range has no usable address; in `dual` mode a new IPv4 is released first.
   */
  async add(req: AddRequest): Promise<FamilyAddResult> {
    const t0 = performance.now();
    try {
      return await this.addBoth(req);
    } finally {
      stageTrace.record('add.v6.handler', performance.now() - t0);
    }
  }

  private async addBoth(req: AddRequest): Promise<FamilyAddResult> {
    await this.o.adoption?.ensure();
    if (this.o.mode === 'dual') return this.addDual(req);
    const r = this.assignV6(req);
    if (!r.existing) await this.durable(r.allocation, 'assign');
    this.logAssigned(req, r);
    return { v6: r.allocation, existing: r.existing };
  }

  /**
   * `dual` ADD: the IPv6 half is assigned in memory first, then the IPv4 half (its
   * assignment and checkpoint write, or its wait on a refill) and the IPv6 checkpoint write
   * run together, so the ADD waits for one write's time, not two in turn. A half that
   * fails undoes the other's new assignment (the IPv4 given back, the IPv6 dropped and
   * written), so a pod never gets one without the other.
   */
  private async addDual(req: AddRequest): Promise<FamilyAddResult> {
    const r = this.assignV6(req);
    const [v4s, v6s] = await Promise.allSettled([
      this.o.v4.add(req),
      r.existing ? Promise.resolve() : this.durable(r.allocation, 'assign'),
    ]);
    if (v4s.status === 'rejected') {
      if (!r.existing && v6s.status === 'fulfilled') await this.dropNewV6(r.allocation);
      throw v4s.reason;
    }
    const v4 = v4s.value;
    if (v6s.status === 'rejected') {
      if (!v4.existing)
        await this.o.v4
          .del(req, 'dual-stack-rollback')
          .catch((d: Error) =>
            this.o.log.error(
              { containerID: req.containerID, ip: v4.allocation.ipv4, err: d.message },
              'dual-stack ADD: the IPv4 half could not be given back; the next DEL or GC releases it',
            ),
          );
      throw v6s.reason;
    }
    this.logAssigned(req, r);
    return { v6: r.allocation, v4, existing: r.existing && v4.existing };
  }

  /** A durable new IPv6 whose IPv4 half failed: dropped (no cooldown: nobody had it) and written. */
  private async dropNewV6(a: V6Allocation): Promise<void> {
    this.o.v6.rollbackAssign(a);
    await this.o
      .persistV6()
      .catch((e: Error) =>
        this.o.log.warn(
          { containerID: a.containerID, ipv6: a.ipv6, err: e.message },
          'dual-stack ADD: the IPv6 half was given back in memory, its checkpoint write failed; the next write carries it',
        ),
      );
  }

  private logAssigned(req: AddRequest, r: { allocation: V6Allocation; existing: boolean }): void {
    this.o.log.info(
      { containerID: req.containerID, ipv6: r.allocation.ipv6, egressV4: r.allocation.egressV4 || null },
      r.existing ? 'ADD: container already holds this IPv6' : 'assigned IPv6',
    );
  }

  private assignV6(req: AddRequest): { allocation: V6Allocation; existing: boolean } {
    try {
      return this.o.v6.assign(req, req.pod, this.now(), this.wallNow());
    } catch (e) {
      throw new PoolExhaustedError((e as Error).message);
    }
  }

  private async durable(a: V6Allocation, what: 'assign' | 'release'): Promise<void> {
    const t0 = performance.now();
    try {
      await this.o.persistV6();
      stageTrace.record(what === 'assign' ? 'add.v6.durable' : 'del.v6.durable', performance.now() - t0);
    } catch (e) {
      if (what === 'assign') this.o.v6.rollbackAssign(a);
      else this.o.v6.rollbackUnassign(a);
      this.o.log.error(
        { containerID: a.containerID, ipv6: a.ipv6, err: (e as Error).message },
        `IPv6 checkpoint write failed; ${what} rolled back`,
      );
      throw new IpamdFailure(
        IpamdCause.Checkpoint,
        `IPv6 checkpoint write failed, the ${what === 'assign' ? 'assignment' : 'release'} was undone: ${(e as Error).message}`,
      );
    }
  }

  /**
   * Releases the key's addresses into cooldown (a key holding nothing: `released: false`).
   * @throws IpamdFailure when a release could not be made durable (the IPv6 half is put
   *   back, so a retried DEL finds it).
   */
  async del(key: AllocationKey, reason: string): Promise<FamilyDelResult> {
    const a = this.o.v6.unassign(key, this.now());
    let v4: DelResult | undefined;
    if (this.o.mode === 'dual') {
      try {
        v4 = await this.o.v4.del(key, reason);
      } catch (e) {
        if (a) this.o.v6.rollbackUnassign(a);
        throw e;
      }
    }
    if (a) await this.durable(a, 'release');
    if (a) this.o.log.info({ containerID: key.containerID, ipv6: a.ipv6, reason }, 'released IPv6');
    return { released: !!a || !!v4?.released, ...(a ? { v6: a } : {}), ...(v4 ? { v4 } : {}) };
  }

  /** CNI CHECK: what the key holds (both halves in `dual` mode), or undefined. */
  lookup(key: AllocationKey): { v6: V6Allocation; v4?: ReturnType<IpamService['lookup']> } | undefined {
    const v6 = this.o.v6.lookup(key);
    if (!v6) return undefined;
    return { v6, ...(this.o.mode === 'dual' ? { v4: this.o.v4.lookup(key) } : {}) };
  }

  /**
   * CNI GC. `dual`: the IPv4 GC (kernel evidence and the release brake, service/gc.ts)
   * decides, a key whose /128 the kernel shows wired counting as listed; the IPv6 half of
   * each key it released goes with it. `ipv6`: the same rules over the IPv6 keys
   * ({@link FamilyService.gcV6}).
   * @returns per released key, the IPv4 and IPv6 halves.
   */
  async gc(
    networkName: string,
    valid: ReadonlyArray<{ containerID: string; ifName: string }>,
  ): Promise<Array<{ key: AllocationKey; ipv4: string; routeTableId: number; v6?: V6Allocation; pod?: PodRef }>> {
    if (this.o.mode === 'ipv6') return this.gcV6(networkName, valid);
    const released = await this.o.v4.gc(networkName, await this.withWiredV6(networkName, valid));
    const out = [];
    let changed = false;
    for (const r of released) {
      const v6 = this.o.v6.unassign(r.allocation, this.now());
      changed ||= !!v6;
      out.push({
        key: r.allocation,
        ipv4: r.allocation.ipv4,
        routeTableId: r.routeTableId ?? 0,
        ...(v6 ? { v6 } : {}),
        ...(r.allocation.pod ? { pod: r.allocation.pod } : {}),
      });
    }
    if (changed) await this.o.persistV6();
    return out;
  }

  /**
   * `dual` GC: `valid` plus the unlisted keys whose /128 the kernel shows wired to a pod
   * veth (logged), so the IPv4 GC keeps both halves of a key either half of which is wired.
   * @throws Error ("GC refused: ...") when the kernel is unreadable; nothing is released.
   */
  private async withWiredV6(
    networkName: string,
    valid: ReadonlyArray<{ containerID: string; ifName: string }>,
  ): Promise<ReadonlyArray<{ containerID: string; ifName: string }>> {
    const keep = new Set(valid.map((v) => v6KeyOf({ networkName, ...v })));
    const stale = this.o.v6.allocations().filter((a) => a.networkName === networkName && !keep.has(v6KeyOf(a)));
    if (stale.length === 0 || !this.o.kernel) return valid;
    const k = await this.o.kernel.readKernel().catch((e: Error) => {
      throw new Error(`GC refused: ${e.message}; nothing released`);
    });
    const wired = stale.filter((a) => k.pods.has(a.ipv6));
    for (const a of wired)
      this.o.log.warn(
        { ipv6: a.ipv6, containerID: a.containerID, ifName: a.ifName, veth: k.pods.get(a.ipv6)?.dev },
        'GC: the runtime did not list this attachment but the kernel shows its /128 wired to a pod veth; both halves kept',
      );
    return [...valid, ...wired.map((a) => ({ containerID: a.containerID, ifName: a.ifName }))];
  }

  /**
   * CNI GC in `ipv6` mode, by the IPv4 GC's rules (service/gc.ts): a key of `networkName`
   * the runtime did not list is released unless the kernel shows its /128 or its egress
   * IPv4 wired to a pod veth; the release brake caps the rest; one durable write, all put
   * back when it fails. Without a kernel source (unit tests) the list is taken as is.
   * @throws Error ("GC refused: ...") when the kernel is unreadable or the brake holds;
   *   IpamdFailure when the write failed. Nothing is released then.
   */
  private async gcV6(
    networkName: string,
    valid: ReadonlyArray<{ containerID: string; ifName: string }>,
  ): Promise<Array<{ key: AllocationKey; ipv4: string; routeTableId: number; v6: V6Allocation; pod?: PodRef }>> {
    const keep = new Set(valid.map((v) => v6KeyOf({ networkName, ...v })));
    const all = this.o.v6.allocations();
    let stale = all.filter((a) => a.networkName === networkName && !keep.has(v6KeyOf(a)));
    if (stale.length === 0) return [];
    if (this.o.kernel)
      stale = await keepWiredAndBrake(this.o.kernel, this.o.log, all.length, stale, (a) =>
        a.egressV4 ? [a.ipv6, a.egressV4] : [a.ipv6],
      );
    const now = this.now();
    const gone = stale.map((a) => this.o.v6.unassign(a, now)).filter((a): a is V6Allocation => !!a);
    if (gone.length === 0) return [];
    try {
      await this.o.persistV6();
    } catch (e) {
      for (const a of gone) this.o.v6.rollbackUnassign(a);
      throw new IpamdFailure(IpamdCause.Checkpoint, `IPv6 checkpoint write failed: ${(e as Error).message}`);
    }
    for (const a of gone)
      this.o.log.info(
        { containerID: a.containerID, ifName: a.ifName, ipv6: a.ipv6, egressV4: a.egressV4 || null, reason: 'cni-gc' },
        "released IPv6 (attachment not in the runtime's valid list)",
      );
    return gone.map((a) => ({ key: a, ipv4: '', routeTableId: 0, v6: a, ...(a.pod ? { pod: a.pod } : {}) }));
  }

  /**
   * Releases the IPv6 half of every key whose container ipamd released on the IPv4 side
   * after the IPv6 allocation was made (`dual`: and whose IPv4 is no longer held), e.g. a
   * DEL the shim spooled while ipamd was down. Nothing else is released: no DEL, no
   * release. One durable write for all.
   * @returns how many were released. @throws IpamdFailure when the write failed (all put back).
   */
  async sweepReleased(): Promise<number> {
    const at = new Map((this.o.released?.() ?? []).map((e) => [e.containerID, e.releasedAt]));
    if (at.size === 0) return 0;
    const gone: V6Allocation[] = [];
    for (const a of this.o.v6.allocations()) {
      const releasedAt = at.get(a.containerID);
      if (releasedAt === undefined || releasedAt < a.allocatedAt) continue;
      if (this.o.mode === 'dual' && this.o.v4.lookup(a)) continue;
      const r = this.o.v6.unassign(a, this.now());
      if (r) gone.push(r);
    }
    if (gone.length === 0) return 0;
    try {
      await this.o.persistV6();
    } catch (e) {
      for (const a of gone) this.o.v6.rollbackUnassign(a);
      throw new IpamdFailure(IpamdCause.Checkpoint, `IPv6 checkpoint write failed: ${(e as Error).message}`);
    }
    for (const a of gone)
      this.o.log.info(
        { containerID: a.containerID, ipv6: a.ipv6 },
        'released IPv6: its container was released on the IPv4 side (DEL spool or IPv4 release)',
      );
    return gone.length;
  }
}
