/**
 * The request path of a node in `ipv6` or `dual` mode (docs/design.md#ip-families), over
 * the IPv6 allocations (datastore/ipv6-allocations.ts) and, in `dual` mode, the IPv4
 * service: one key holds both families, assigned, released and looked up together.
 * Every change is durable (the IPv6 checkpoint, and the IPv4 one for the IPv4 half)
 * before it is answered; a change that cannot be made durable is undone.
 *
 * `dual` ADD takes the IPv4 first (it may wait on a refill), then the IPv6; when the IPv6
 * half fails, a new IPv4 is given back, so a pod never gets one without the other. DEL
 * releases both or, when a write fails, neither is left half-released in memory (the DEL
 * is retried). A DEL that reached only the IPv4 datastore (the DEL spool, applied while
 * ipamd starts) releases the IPv6 half at the next {@link FamilyService.sweepReleased}.
 */
import { monoNow } from '../clock.js';
import type { IpFamilyMode } from '../../proto/ipam.js';
import { IpamdCause } from '../../proto/ipamd-cause.js';
import type { Ipv6Allocations, V6Allocation } from '../datastore/ipv6-allocations.js';
import type { AllocationKey } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { PoolExhaustedError } from '../controller/pool-loop/pool-controller.js';
import type { AddRequest, AddResult, DelResult, IpamService } from './ipam-service.js';
import { IpamdFailure } from './ipamd-failure.js';

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
   * Assigns the key's addresses (idempotent).
   * @throws what IpamService.add throws (`dual`); IpamdFailure (cause checkpoint) when the
   *   IPv6 half could not be made durable; PoolExhaustedError when the /80 or the
   *   egress range has no usable address; in `dual` mode a new IPv4 is released first.
   */
  async add(req: AddRequest): Promise<FamilyAddResult> {
    const v4 = this.o.mode === 'dual' ? await this.o.v4.add(req) : undefined;
    try {
      const r = this.assignV6(req);
      if (!r.existing) await this.durable(r.allocation, 'assign');
      this.o.log.info(
        { containerID: req.containerID, ipv6: r.allocation.ipv6, egressV4: r.allocation.egressV4 || null },
        r.existing ? 'ADD: container already holds this IPv6' : 'assigned IPv6',
      );
      return { v6: r.allocation, ...(v4 ? { v4 } : {}), existing: r.existing && (v4?.existing ?? true) };
    } catch (e) {
      if (v4 && !v4.existing)
        await this.o.v4
          .del(req, 'dual-stack-rollback')
          .catch((d: Error) =>
            this.o.log.error(
              { containerID: req.containerID, ip: v4.allocation.ipv4, err: d.message },
              'dual-stack ADD: the IPv4 half could not be given back; the next DEL or GC releases it',
            ),
          );
      throw e;
    }
  }

  private assignV6(req: AddRequest): { allocation: V6Allocation; existing: boolean } {
    try {
      return this.o.v6.assign(req, req.pod, this.now(), this.wallNow());
    } catch (e) {
      throw new PoolExhaustedError((e as Error).message);
    }
  }

  private async durable(a: V6Allocation, what: 'assign' | 'release'): Promise<void> {
    try {
      await this.o.persistV6();
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
   * decides; the IPv6 half of each key it released goes with it. `ipv6`: nothing is
   * released (the kernel check does not yet read /128 routes, and GC releases nothing on
   * one source's word); the keys the runtime did not list are logged.
   * @returns per released key, the IPv4 and IPv6 halves.
   */
  async gc(
    networkName: string,
    valid: ReadonlyArray<{ containerID: string; ifName: string }>,
  ): Promise<Array<{ key: AllocationKey; ipv4: string; routeTableId: number; v6?: V6Allocation }>> {
    if (this.o.mode === 'ipv6') {
      const keep = new Set(valid.map((v) => `${v.containerID}/${v.ifName}`));
      const stale = this.o.v6
        .allocations()
        .filter((a) => a.networkName === networkName && !keep.has(`${a.containerID}/${a.ifName}`));
      if (stale.length)
        this.o.log.warn(
          { networkName, stale: stale.map((a) => a.containerID) },
          'GC in IPv6 mode: the runtime did not list these attachments; kept (no kernel evidence for /128s yet)',
        );
      return [];
    }
    const released = await this.o.v4.gc(networkName, valid);
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
      });
    }
    if (changed) await this.o.persistV6();
    return out;
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
