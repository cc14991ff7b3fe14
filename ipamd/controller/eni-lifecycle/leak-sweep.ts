/**
 * The leaked-ENI sweep (docs/design.md#eni-ownership; docs/design.md#10-the-warm-pool-at-depth item 4): deletes ENIs that
 * eni-ipam created and nobody uses any more — left `available` by a crash between
 * CreateNetworkInterface and AttachNetworkInterface, or between Detach and Delete, or by
 * a node that was terminated while an ENI was detached.
 *
 * What qualifies (all must hold; one DescribeNetworkInterfaces with filters, every page
 * read, or no decision at all):
 * - status `available` (never attached, never `in-use`/`attaching`/`detaching`);
 * - tagged `node.k8s.amazonaws.com/instance_id` and described `aws-K8S-…` (ours), not
 *   `node.k8s.amazonaws.com/no_manage=true`, in our VPC;
 * - scope: with CLUSTER_NAME set, tagged `cluster.k8s.amazonaws.com/name=<cluster>` (any
 *   instance of the cluster, so ENIs of terminated nodes are found too); without it,
 *   only ENIs tagged with **this** instance's id;
 * - its `createdAt` tag is at least `minAgeMs` (5 min) old (a missing or malformed tag
 *   means "not provably old": left alone);
 * - not being created/attached/freed by this process right now;
 * - releases are not frozen (checked before the describe and again before each delete).
 *
 * Choice vs amazon-vpc-cni-k8s (pkg/awsutils `getLeakedENIs`): it filters by the
 * instance_id tag *key* (any instance), `status=available`, the VPC, and the cluster tag
 * when CLUSTER_NAME is set, and re-tags ENIs that lack `createdAt`. We follow it with the
 * cluster tag, but without CLUSTER_NAME we stay on this instance's ENIs (the tag key
 * alone would reach every cluster in the VPC), and we never tag ENIs we did not create.
 * An `available` ENI holds no address a pod can use (it is attached to no instance), so
 * deleting it cannot take an IP from a running pod.
 */
import { Ec2Error, type Ec2Port, type Ec2Eni } from '../../cloud/ec2-port.js';
import type { Logger } from '../../log.js';
import {
  ENI_DESCRIPTION_PREFIX,
  eniCreatedAtMs,
  TAG_CLUSTER_NAME,
  TAG_INSTANCE_ID,
  TAG_NO_MANAGE,
} from './eni-ownership.js';
import type { ReleaseGate } from '../release/release-gate.js';
import { PeriodicTask } from '../periodic-task.js';

/** Minimum age of a leaked ENI before the sweep deletes it (ms): 5 min, as docs/design.md#3-contracts and AWS. */
export const LEAKED_ENI_MIN_AGE_MS = 5 * 60_000;

/** What {@link whyNotLeaked} judges an ENI against. */
export interface LeakScope {
  instanceId: string;
  vpcId: string;
  clusterName?: string;
  /** ms; default {@link LEAKED_ENI_MIN_AGE_MS}. */
  minAgeMs?: number;
  isBusy?: (eniId: string) => boolean;
  /** ms since the epoch. */
  now: number;
}

/**
 * Decides whether one described ENI is a leak this node may delete now (rules in the
 * module docstring). Pure. @returns undefined when it may be deleted, else why it is kept.
 */
export function whyNotLeaked(eni: Ec2Eni, s: LeakScope): string | undefined {
  if (eni.status !== 'available' || eni.attachment) return `status ${eni.status}`;
  if (!eni.tags[TAG_INSTANCE_ID] || !eni.description.startsWith(ENI_DESCRIPTION_PREFIX))
    return 'not created by eni-ipam';
  if (eni.tags[TAG_NO_MANAGE] === 'true') return 'no_manage=true';
  if (s.clusterName ? eni.tags[TAG_CLUSTER_NAME] !== s.clusterName : eni.tags[TAG_INSTANCE_ID] !== s.instanceId)
    return "outside this sweep's scope";
  if (eni.vpcId && eni.vpcId !== s.vpcId) return 'another VPC';
  const created = eniCreatedAtMs(eni);
  if (created === undefined) return 'no valid createdAt tag';
  if (s.now - created < (s.minAgeMs ?? LEAKED_ENI_MIN_AGE_MS)) return 'younger than the minimum age';
  if (s.isBusy?.(eni.eniId)) return 'in use by this ipamd';
  return undefined;
}

/** Options of {@link LeakedEniSweeper}. */
export interface LeakedEniSweeperOptions {
  ec2: Ec2Port;
  gate: ReleaseGate;
  log: Logger;
  instanceId: string;
  vpcId: string;
  clusterName?: string;
  /** Period between sweeps (ms). */
  intervalMs: number;
  /** The first sweep starts after a random delay in [0, jitterMs] (ms), so nodes do not sweep in step. */
  jitterMs: number;
  /** ENIs younger than this (by their createdAt tag) are kept (ms, default {@link LEAKED_ENI_MIN_AGE_MS}). */
  minAgeMs?: number;
  /** True for ENIs this process is working on (EniManager.isBusy). */
  isBusy?: (eniId: string) => boolean;
  now?: () => number;
  random?: () => number;
}

/** What one sweep did. `skipped` says why nothing was examined (frozen, describe failed). */
export interface SweepReport {
  at: number;
  skipped?: string;
  examined: number;
  deleted: string[];
  kept: Array<{ eniId: string; why: string }>;
  failed: Array<{ eniId: string; error: string }>;
}

/** Runs the sweep on a jittered timer. */
export class LeakedEniSweeper {
  private readonly now: () => number;
  private readonly task: PeriodicTask;
  private running?: Promise<SweepReport>;
  private stopped = false;
  /** The last sweep's report (for status). */
  last?: SweepReport;

  constructor(private readonly o: LeakedEniSweeperOptions) {
    this.now = o.now ?? Date.now;
    this.task = new PeriodicTask({ intervalMs: o.intervalMs, run: () => this.runOnce() });
  }

  /** Schedules the first sweep after the start jitter, then one every `intervalMs`. */
  start(): void {
    const first = Math.round((this.o.random ?? Math.random)() * this.o.jitterMs);
    this.o.log.info(
      {
        firstInMs: first,
        intervalMs: this.o.intervalMs,
        scope: this.o.clusterName ? `cluster ${this.o.clusterName}` : `instance ${this.o.instanceId}`,
      },
      'leaked-ENI sweep scheduled',
    );
    this.task.start(first);
  }

  /** Stops the timer and waits for a sweep in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.task.stop();
    await this.running?.catch(() => undefined);
  }

  /** Runs one sweep now (coalesced with one in flight). Never throws. */
  runOnce(): Promise<SweepReport> {
    this.running ??= this.sweep().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  /** Why one described ENI is kept, or undefined when this sweep may delete it (see {@link whyNotLeaked}). */
  whyKeep(eni: Ec2Eni, now: number): string | undefined {
    return whyNotLeaked(eni, { ...this.o, now });
  }

  private async sweep(): Promise<SweepReport> {
    const { ec2, gate, log } = this.o;
    const r: SweepReport = { at: this.now(), examined: 0, deleted: [], kept: [], failed: [] };
    if (gate.frozen) {
      r.skipped = `releases frozen: ${gate.describe().join('; ')}`;
      log.info({ reasons: gate.describe() }, 'leaked-ENI sweep skipped: releases are frozen');
      return (this.last = r);
    }
    const filters: Record<string, string[]> = {
      status: ['available'],
      'vpc-id': [this.o.vpcId],
      'tag-key': [TAG_INSTANCE_ID],
    };
    if (this.o.clusterName) filters[`tag:${TAG_CLUSTER_NAME}`] = [this.o.clusterName];
    else filters[`tag:${TAG_INSTANCE_ID}`] = [this.o.instanceId];
    let found: Ec2Eni[];
    try {
      found = await ec2.describeEnisByFilters(filters);
    } catch (e) {
      r.skipped = `describe failed: ${(e as Error).message}`;
      log.warn({ err: (e as Error).message }, 'leaked-ENI sweep: describe failed; no decision this round');
      return (this.last = r);
    }
    for (const eni of found) {
      r.examined++;
      const why = this.whyKeep(eni, this.now());
      if (why) {
        r.kept.push({ eniId: eni.eniId, why });
        continue;
      }
      if (gate.frozen || this.stopped) break;
      try {
        await ec2.deleteEni(eni.eniId);
        r.deleted.push(eni.eniId);
        log.info(
          {
            eniId: eni.eniId,
            owner: eni.tags[TAG_INSTANCE_ID],
            createdAt: eni.tags['node.k8s.amazonaws.com/createdAt'],
          },
          'deleted leaked ENI',
        );
      } catch (e) {
        if (e instanceof Ec2Error && e.code === 'InvalidNetworkInterfaceID.NotFound') r.deleted.push(eni.eniId);
        else {
          r.failed.push({ eniId: eni.eniId, error: (e as Error).message });
          log.warn({ eniId: eni.eniId, err: (e as Error).message }, 'could not delete leaked ENI; next sweep retries');
        }
      }
    }
    if (r.deleted.length || r.failed.length)
      log.info({ deleted: r.deleted, failed: r.failed.length, kept: r.kept.length }, 'leaked-ENI sweep done');
    return (this.last = r);
  }
}
