/**
 * The request path of ipamd, independent of gRPC: ADD assigns from memory and makes
 * the change durable before answering; DEL releases into cooldown the same way.
 * A failed checkpoint write undoes the change and fails the request (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip step 3).
 */
import { podRouteTable } from '../../netfacts/routing.js';
import { monoNow } from '../clock.js';
import { DEL_REASON_IP_CONFLICT } from '../../proto/ipam.js';
import type { Assignments, PoolCounts } from '../datastore/roles.js';
import type { Allocation, AllocationKey, EniInfo, PodRef } from '../datastore/types.js';
import type { Logger } from '../log.js';
import { PoolExhaustedError, type PoolController } from '../controller/pool-loop/pool-controller.js';
import type { KernelReader } from '../restore/kernel-source.js';
import { gcNetwork, type GcAttachment, type GcReleased } from './gc.js';
import { stageTrace } from './stage-trace.js';
import { IpamdCause } from '../../proto/ipamd-cause.js';
import { explainNoAddress, IpamdFailure } from './ipamd-failure.js';
import { ipamStatus, type IpamStatus } from './status.js';

/** Route table id of the main table (pods on the primary ENI). */

/** What ADD needs beyond the key. */
export interface AddRequest extends AllocationKey {
  pod?: PodRef;
  netns?: string;
}

/** Successful ADD. */
export interface AddResult {
  allocation: Allocation;
  eni: EniInfo;
  routeTableId: number;
  /** True when the key already held this address (repeated ADD). */
  existing: boolean;
}

/** Result of DEL; `released` is false for a key that held nothing. */
export interface DelResult {
  released: boolean;
  allocation?: Allocation;
  eni?: EniInfo;
  routeTableId?: number;
}

/** The address cannot be served now (the gRPC layer maps this to UNAVAILABLE, cause `not-ready`). */
export class NotReadyError extends IpamdFailure {
  constructor(message: string) {
    super(IpamdCause.NotReady, message);
    this.name = 'NotReadyError';
  }
}

/** Options of {@link IpamService}. */
export interface IpamServiceOptions {
  ds: Assignments & PoolCounts;
  pool: PoolController;
  /** Makes the datastore's current state durable (checkpoint group commit). */
  persist: () => Promise<void>;
  log: Logger;
  /** Bounded wait for an address when the pool is empty (ms). */
  addWaitTimeoutMs: number;
  /** Longest wait in all (ms) while a refill is still under way (an ENI being created and attached); ≤ addWaitTimeoutMs: no longer wait. */
  addWaitGrowingMs?: number;
  now?: () => number;
  /** Told of each IP quarantined after a refused ADD (metrics). */
  onConflict?: (ip: string) => void;
  /** The node's kernel, checked before CNI GC releases anything (see gcNetwork). */
  kernel?: KernelReader;
  /** Told of each failed ADD with its reason; `noIp` when it failed for want of an address (metrics); `detail`: the pod and the error message (Events). */
  onAddFailed?: (reason: AddFailureReason, noIp: boolean, detail: { pod?: PodRef; message: string }) => void;
  /** True once ipamd has begun to stop (an ADD that then gets no address says ipamd is restarting). */
  stopping?: () => boolean;
  /** True while EC2 throttles ipamd (an ADD that got no address then says so); cloud/throttle-watch.ts. */
  ec2Throttled?: () => boolean;
  /** Told of each DEL request with the reason the plugin gave (metrics). */
  onDel?: (reason: string) => void;
}

/** Why an ADD failed (the `reason` label of `eni_ipam_add_failures_total`). */
export type AddFailureReason = ReturnType<PoolController['addFailureReason']> | 'not_ready' | 'internal';

/** The fields every ADD/DEL log line carries: pod namespace/name, container id, IP, ENI (null when unknown). */
function podFields(key: AllocationKey, pod: PodRef | undefined, ip: string | undefined, eniId: string | undefined) {
  return {
    podNamespace: pod?.namespace ?? null,
    podName: pod?.name ?? null,
    containerID: key.containerID,
    ip: ip ?? null,
    eniId: eniId ?? null,
  };
}

/** ADD/DEL semantics over the datastore, the checkpoint and the pool controller. */
export class IpamService {
  private readonly now: () => number;

  constructor(private readonly o: IpamServiceOptions) {
    this.now = o.now ?? monoNow;
  }

  /**
   * Assigns an address to the key (idempotent), waiting up to `addWaitTimeoutMs` on a
   * coalesced refill when the pool is empty.
   * @throws PoolExhaustedError (no address within the wait, with the reason),
   *         IpamdFailure (retryable, with its cause: no address while addresses are held
   *         unverified, EC2 throttled or ipamd stopping — see explainNoAddress; the
   *         checkpoint write failed and the assignment was rolled back; NotReadyError:
   *         restored address not yet visible on an ENI). docs/design.md#cni-errors
   */
  async add(req: AddRequest): Promise<AddResult> {
    const t0 = performance.now();
    try {
      return await this.addOnce(req);
    } catch (e) {
      const noIp = e instanceof PoolExhaustedError;
      const reason: AddFailureReason = noIp
        ? this.o.pool.addFailureReason()
        : e instanceof NotReadyError
          ? 'not_ready'
          : 'internal';
      this.o.log.warn(
        { ...podFields(req, req.pod, undefined, undefined), reason, err: (e as Error).message },
        'ADD failed',
      );
      this.o.onAddFailed?.(reason, noIp, { ...(req.pod ? { pod: req.pod } : {}), message: (e as Error).message });
      if (!noIp) throw e;
      const { pool, ds } = this.o;
      throw explainNoAddress(e as Error, {
        reason,
        counts: ds.counts(this.now()),
        freezeReasons: pool.freezeReasons(),
        stopping: pool.stopping || (this.o.stopping?.() ?? false),
        throttled: this.o.ec2Throttled?.() ?? false,
      });
    } finally {
      stageTrace.record('add.handler', performance.now() - t0);
    }
  }

  private async addOnce(req: AddRequest): Promise<AddResult> {
    const { ds, pool, log } = this.o;
    const start = this.now();
    const deadline = start + this.o.addWaitTimeoutMs;
    const growingDeadline = start + Math.max(this.o.addWaitTimeoutMs, this.o.addWaitGrowingMs ?? 0);
    for (;;) {
      const r = stageTrace.time('add.datastore', () => ds.assign(req, req.pod, this.now()));
      if (r.kind === 'pending')
        throw new NotReadyError(
          `address ${r.allocation.ipv4} restored for this container is not yet visible on any ENI; retry`,
        );
      if (r.kind === 'existing') {
        log.info(
          podFields(req, req.pod ?? r.allocation.pod, r.allocation.ipv4, r.eni.eniId),
          'ADD: container already holds this IP',
        );
        return { allocation: r.allocation, eni: r.eni, routeTableId: podRouteTable(r.eni), existing: true };
      }
      if (r.kind === 'assigned') {
        const t1 = performance.now();
        try {
          await this.o.persist();
          stageTrace.record('add.durable', performance.now() - t1);
        } catch (e) {
          ds.rollbackAssign(r.allocation);
          log.error(
            { ...podFields(req, req.pod, r.allocation.ipv4, r.eni.eniId), err: (e as Error).message },
            'checkpoint write failed; assignment rolled back',
          );
          throw new IpamdFailure(
            IpamdCause.Checkpoint,
            `checkpoint write failed, the assignment was undone: ${(e as Error).message}`,
          );
        }
        pool.changed();
        log.info(podFields(req, req.pod, r.allocation.ipv4, r.eni.eniId), 'assigned IP');
        return { allocation: r.allocation, eni: r.eni, routeTableId: podRouteTable(r.eni), existing: false };
      }
      const now = this.now();
      const left = deadline - now;
      // Past its own wait, an ADD keeps waiting only while the pool is still growing.
      if (left <= 0 && !(now < growingDeadline && pool.stillGrowing)) {
        throw new PoolExhaustedError(
          `no free IP within ${now - start} ms${pool.lastError ? `: ${pool.lastError}` : ''}`,
        );
      }
      log.info(
        { ...podFields(req, req.pod, undefined, undefined), waitMs: left, growingWaitMs: growingDeadline - now },
        'ADD: pool empty: waiting for a refill',
      );
      await pool.waitForAddress(Math.max(left, 0), growingDeadline - now);
    }
  }

  /**
   * Unassigns the key's address into cooldown. A key holding nothing succeeds with
   * `released: false` (the container is remembered as unassigned either way, durably). With
   * reason {@link DEL_REASON_IP_CONFLICT} the address is also
   * quarantined ({@link Assignments.quarantine}), logged as a duplicate and reported. @throws Error if the release could not be made durable (then
   * the allocation is put back, so a retried DEL finds it).
   */
  async del(key: AllocationKey, reason: string): Promise<DelResult> {
    const { ds, log } = this.o;
    this.o.onDel?.(reason);
    const t0 = performance.now();
    const known = ds.wasUnassigned(key.containerID);
    const a = stageTrace.time('del.datastore', () => ds.unassign(key, this.now()));
    if (!a) {
      log.info({ ...podFields(key, undefined, undefined, undefined), reason }, 'DEL: container holds no IP');
      // The DEL is remembered (a sandbox still stopping is never adopted, even after a
      // restart): written once, best effort, as a DEL of nothing must still succeed.
      if (!known)
        await this.o
          .persist()
          .catch((e: Error) =>
            log.warn({ err: e.message, containerID: key.containerID }, 'checkpoint write of a remembered DEL failed'),
          );
      return { released: false };
    }
    if (reason === DEL_REASON_IP_CONFLICT) {
      // Same tick as the release: no ADD can be handed the address in between.
      ds.quarantine(
        a.ipv4,
        this.now(),
        `ADD of container ${key.containerID} found it routed to another pod on the node`,
      );
      log.error(
        podFields(key, a.pod, a.ipv4, a.eniId),
        'duplicate IP: the node already routes this IP to another pod (an allocation ipamd lost); ADD refused, IP quarantined until that route is gone',
      );
      this.o.onConflict?.(a.ipv4);
    }
    const t1 = performance.now();
    try {
      await this.o.persist();
      stageTrace.record('del.durable', performance.now() - t1);
    } catch (e) {
      ds.rollbackUnassign(a);
      log.error(
        { ...podFields(key, a.pod, a.ipv4, a.eniId), err: (e as Error).message },
        'checkpoint write failed; release rolled back',
      );
      throw new IpamdFailure(
        IpamdCause.Checkpoint,
        `checkpoint write failed, the release was undone: ${(e as Error).message}`,
      );
    }
    this.o.pool.changed();
    const eni = ds.getEni(a.eniId);
    log.info({ ...podFields(key, a.pod, a.ipv4, a.eniId), reason }, 'released IP');
    stageTrace.record('del.handler', performance.now() - t0);
    return { released: true, allocation: a, ...(eni ? { eni, routeTableId: podRouteTable(eni) } : {}) };
  }

  /**
   * CNI GC: releases (into cooldown, durably) every allocation of `networkName` whose
   * attachment is not in `valid`; see {@link gcNetwork}. @throws Error if not durable.
   */
  async gc(networkName: string, valid: readonly GcAttachment[]): Promise<GcReleased[]> {
    return gcNetwork(
      {
        ds: this.o.ds,
        persist: this.o.persist,
        released: () => this.o.pool.changed(),
        log: this.o.log,
        now: this.now,
        routeTableFor: podRouteTable,
        ...(this.o.kernel ? { kernel: this.o.kernel } : {}),
      },
      networkName,
      valid,
    );
  }

  /** CNI STATUS: whether an ADD can get an address now; see {@link ipamStatus}. */
  status(): IpamStatus {
    return ipamStatus({
      ds: this.o.ds,
      growBlockedReason: () => this.o.pool.growBlockedReason(),
      addWaitTimeoutMs: this.o.addWaitTimeoutMs,
      now: this.now,
    });
  }

  /** CNI CHECK: the key's allocation and its ENI's route table, or undefined. Changes nothing. */
  lookup(key: AllocationKey): { allocation: Allocation; eni?: EniInfo; routeTableId?: number } | undefined {
    const a = this.o.ds.lookup(key);
    if (!a) return undefined;
    const eni = this.o.ds.getEni(a.eniId);
    return eni ? { allocation: a, eni, routeTableId: podRouteTable(eni) } : { allocation: a };
  }
}
