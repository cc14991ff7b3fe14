/**
 * {@link SubnetPlacement}: the {@link EniPlacement} ipamd runs with — the I/O edge around
 * the pure {@link planPlacement}. It reads the ENIConfig selection (custom networking) from
 * a function, describes the subnets it needs (discovery: the node's VPC and zone;
 * custom networking: the ENIConfig's subnets) with at most one DescribeSubnets per
 * {@link SubnetPlacementOptions.cacheMs} (parallel plans share one call; none with
 * discovery off and custom networking off), and keeps the exhausted marks.
 *
 * Never on the ADD path: only ENI creations (grow, off the ADD path) call {@link plan}.
 * docs/design.md#eni-ownership ("Placement and failover").
 */
import { monoNow } from '../../clock.js';
import type { Ec2Port, Ec2Subnet } from '../../cloud/ec2-port.js';
import type { Logger } from '../../log.js';
import type { EniConfigSelection, EniPlacement, PlacementPlan } from './placement-types.js';
import { isExhaustedAt, planPlacement, type ExhaustedMark, type NodeSubnetFacts } from './subnet-placement.js';

/** Options of {@link SubnetPlacement}. */
export interface SubnetPlacementOptions {
  ec2: Pick<Ec2Port, 'describeSubnets'>;
  node: NodeSubnetFacts;
  /** The ENIConfig selection now (custom networking); omit: always `{ state: 'off' }`. */
  selection?: () => EniConfigSelection;
  /** ENABLE_SUBNET_DISCOVERY. */
  discovery: boolean;
  /** How long a subnet stays exhausted after EC2 said so (ms, default 30 000: the grow pause on a full subnet). */
  exhaustedMs?: number;
  /** How long one DescribeSubnets answer is reused (ms, default 5 000). */
  cacheMs?: number;
  /**
   * Addresses one new ENI is expected to take (default 1): each plan reserves them on its
   * first candidate until {@link SubnetPlacement.release}, so creations planned in
   * parallel from one describe spread by most free instead of all picking the same subnet.
   */
  perEniAddresses?: number;
  now?: () => number;
  log: Logger;
  /** Told of every described subnet (metrics: free addresses per subnet). */
  onDescribed?: (s: Ec2Subnet) => void;
  /** Told when a subnet becomes exhausted (true) or its mark ends (false) (metrics). */
  onExhausted?: (subnetId: string, exhausted: boolean) => void;
}

/** Subnet discovery / custom networking placement with exhausted marks and a short describe cache. */
export class SubnetPlacement implements EniPlacement {
  private readonly exhausted = new Map<string, ExhaustedMark>();
  /** Addresses reserved per subnet by plans whose creation has not ended yet. */
  private readonly reserved = new Map<string, number>();
  /** Last description of every subnet ever described (a CIDR never changes; free counts go stale). */
  private readonly known = new Map<string, Ec2Subnet>();
  private cache?: { at: number; key: string; subnets: Ec2Subnet[] };
  private pending?: { key: string; run: Promise<Ec2Subnet[] | undefined> };
  private readonly now: () => number;

  constructor(private readonly o: SubnetPlacementOptions) {
    this.now = o.now ?? monoNow;
  }

  /** The candidates for the next ENI (see {@link planPlacement}). Never throws. */
  async plan(): Promise<PlacementPlan> {
    this.expireMarks();
    const selection = this.o.selection?.() ?? { state: 'off' };
    const filters = this.filtersFor(selection);
    let subnets: Ec2Subnet[] | undefined;
    if (filters) {
      subnets = await this.describe(filters);
      // Custom networking: stale facts beat none (a subnet's CIDR never changes).
      if (!subnets && selection.state === 'ok')
        subnets = selection.subnetIds.flatMap((id) => (this.known.has(id) ? [this.known.get(id)!] : []));
    }
    const adjusted = subnets?.map((s) => ({
      ...s,
      // Reservations rank, never empty a subnet (0 means "no free address" to the plan).
      availableIps: s.availableIps > 0 ? Math.max(s.availableIps - (this.reserved.get(s.subnetId) ?? 0), 1) : 0,
    }));
    const plan = planPlacement({
      selection,
      discovery: this.o.discovery,
      node: this.o.node,
      ...(adjusted ? { subnets: adjusted } : {}),
      exhausted: this.exhausted,
      now: this.now(),
    });
    const first = plan.ok ? plan.candidates[0]! : undefined;
    if (first) this.reserved.set(first.subnetId, (this.reserved.get(first.subnetId) ?? 0) + this.perEni());
    return plan;
  }

  /** The creation planned with `subnetId` first has ended (either way): its reservation goes. */
  release(subnetId: string): void {
    const left = (this.reserved.get(subnetId) ?? 0) - this.perEni();
    if (left > 0) this.reserved.set(subnetId, left);
    else this.reserved.delete(subnetId);
  }

  private perEni(): number {
    return this.o.perEniAddresses ?? 1;
  }

  /** Marks `subnetId` exhausted for `exhaustedMs` (EC2 answered `code`); its cached free count becomes 0. */
  markExhausted(subnetId: string, code: string): void {
    const was = this.isExhausted(subnetId);
    this.exhausted.set(subnetId, { code, untilMs: this.now() + (this.o.exhaustedMs ?? 30_000) });
    for (const s of this.cache?.subnets ?? []) if (s.subnetId === subnetId) s.availableIps = 0;
    if (!was) {
      this.o.log.warn({ subnetId, code, forMs: this.o.exhaustedMs ?? 30_000 }, 'subnet marked exhausted');
      this.o.onExhausted?.(subnetId, true);
    }
  }

  /** Whether `subnetId` is marked exhausted now. */
  isExhausted(subnetId: string): boolean {
    return isExhaustedAt(this.exhausted, subnetId, this.now());
  }

  /** The subnets marked exhausted now, with EC2's code and when the mark ends (ms epoch). */
  exhaustedNow(): Array<{ subnetId: string; code: string; untilMs: number }> {
    this.expireMarks();
    return [...this.exhausted].map(([subnetId, m]) => ({ subnetId, ...m }));
  }

  /**
   * An ENI was created in `subnetId` holding `addresses` addresses: the cached free count
   * drops by as many, so parallel creations from one describe spread by most free, and
   * an exhausted mark on it ends (EC2 had room after all).
   */
  noteCreated(subnetId: string, addresses: number): void {
    for (const s of this.cache?.subnets ?? [])
      if (s.subnetId === subnetId) s.availableIps = Math.max(s.availableIps - addresses, 0);
    if (this.exhausted.delete(subnetId)) this.o.onExhausted?.(subnetId, false);
  }

  /** The IPv4 CIDR of a subnet described before (or the node's), else undefined. */
  cidrOf(subnetId: string): string | undefined {
    return subnetId === this.o.node.subnetId ? this.o.node.cidr : this.known.get(subnetId)?.cidr;
  }

  private filtersFor(sel: EniConfigSelection): Record<string, string[]> | undefined {
    if (sel.state === 'ok') return { 'subnet-id': [...sel.subnetIds] };
    if (sel.state === 'off' && this.o.discovery)
      return { 'vpc-id': [this.o.node.vpcId], 'availability-zone': [this.o.node.availabilityZone] };
    return undefined;
  }

  /** One DescribeSubnets per `cacheMs` for the same filters; parallel callers share it. undefined = failed (logged). */
  private async describe(filters: Record<string, string[]>): Promise<Ec2Subnet[] | undefined> {
    const key = JSON.stringify(filters);
    const now = this.now();
    if (this.cache && this.cache.key === key && now - this.cache.at < (this.o.cacheMs ?? 5_000))
      return this.cache.subnets;
    if (this.pending?.key === key) return this.pending.run;
    const run = (async () => {
      try {
        const subnets = await this.o.ec2.describeSubnets(filters);
        this.cache = { at: this.now(), key, subnets };
        for (const s of subnets) {
          this.known.set(s.subnetId, { ...s });
          this.o.onDescribed?.(s);
        }
        return subnets;
      } catch (e) {
        this.o.log.warn(
          { filters, err: (e as Error).message },
          'DescribeSubnets failed: placing the next ENI without it (discovery falls back to the node subnet)',
        );
        return undefined;
      } finally {
        this.pending = undefined;
      }
    })();
    this.pending = { key, run };
    return run;
  }

  private expireMarks(): void {
    const now = this.now();
    for (const [id, m] of this.exhausted)
      if (m.untilMs <= now) {
        this.exhausted.delete(id);
        this.o.onExhausted?.(id, false);
      }
  }
}

/**
 * A placement in the node's subnet only (discovery and custom networking off: no
 * DescribeSubnets ever), with its exhausted mark: the ENI manager's default.
 */
export function nodeSubnetPlacement(
  node: NodeSubnetFacts,
  log: Logger,
  opts: { exhaustedMs?: number; now?: () => number } = {},
): SubnetPlacement {
  return new SubnetPlacement({
    ec2: {
      describeSubnets: () => Promise.reject(new Error('DescribeSubnets is not used by the node-subnet placement')),
    },
    node,
    discovery: false,
    log,
    ...opts,
  });
}
