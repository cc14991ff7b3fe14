/**
 * Where the next ENI goes (docs/design.md#eni-ownership, "Placement and failover"): the
 * pure part. Facts in (the ENIConfig selection, the subnets as DescribeSubnets showed
 * them, the exhausted marks), an ordered list of candidates or a reason out. No I/O; the
 * edge that describes subnets and keeps the marks is subnet-placement-source.ts.
 *
 * Rules (amazon-vpc-cni-k8s v1.18+ semantics for discovery, its README
 * "ENABLE_SUBNET_DISCOVERY" and "Subnet tags related to Allocation"):
 * - custom networking on (`AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG`): the ENIConfig's subnets
 *   (discovery is not consulted), with its security groups, or the primary ENI's when it
 *   lists none;
 * - else with `ENABLE_SUBNET_DISCOVERY`: the subnets of the node's VPC and zone whose tag
 *   `kubernetes.io/role/cni` is set and not `0`, plus the node's own subnet unless it is
 *   tagged `0`; security groups of the primary ENI;
 * - else (or when the discovery describe fails, as upstream) the node's subnet alone;
 * - candidates are ranked by most free addresses (`AvailableIpAddressCount`), ties and
 *   undescribed subnets in list order (ENIConfig order, or the node subnet first);
 * - subnets marked exhausted (EC2 answered `InsufficientFreeAddressesInSubnet` /
 *   `InsufficientCidrBlocks`) are left out until their mark expires, and so are subnets
 *   the describe shows with no free address at all.
 */
import type { Ec2Subnet } from '../../cloud/ec2-port.js';
import type { EniConfigSelection, PlacementCandidate, PlacementPlan } from './placement-types.js';

/** Subnet tag of amazon-vpc-cni-k8s subnet discovery: `1` (any value but `0`) = eligible, `0` = excluded. */
export const CNI_ROLE_TAG = 'kubernetes.io/role/cni';
/** Prefix of amazon-vpc-cni-k8s (v1.22.1+) cluster-scoped subnet tags: `cni.networking.k8s.aws/cluster/<CLUSTER_NAME>`. */
export const CLUSTER_SUBNET_TAG_PREFIX = 'cni.networking.k8s.aws/cluster/';

/** EC2 error codes meaning the subnet cannot give more addresses now. */
export const SUBNET_FULL_CODES: ReadonlySet<string> = new Set([
  'InsufficientFreeAddressesInSubnet',
  'InsufficientCidrBlocks',
]);

/**
 * No ENI could be created for a placement reason: `eniconfig` (the ENIConfig is
 * missing/invalid/unknown) and `subnets_exhausted` (every candidate is exhausted; the
 * message lists them) block the refill; `unavailable` (subnets not described yet) is transient.
 */
export class PlacementError extends Error {
  constructor(
    readonly kind: 'eniconfig' | 'subnets_exhausted' | 'unavailable',
    message: string,
  ) {
    super(message);
    this.name = 'PlacementError';
  }
}

/** The node's own facts a plan starts from (IMDS: the primary ENI). */
export interface NodeSubnetFacts {
  subnetId: string;
  /** IPv4 CIDR of the node's subnet. */
  cidr: string;
  vpcId: string;
  availabilityZone: string;
  /** The primary ENI's security groups. */
  securityGroupIds: string[];
  /** CLUSTER_NAME: a tagged subnet carrying cluster tags serves only the cluster it names. */
  clusterName?: string;
}

/** One exhausted mark: EC2's code and when the mark expires (ms epoch). */
export interface ExhaustedMark {
  code: string;
  untilMs: number;
}

/** Everything {@link planPlacement} decides from. */
export interface PlacementFacts {
  selection: EniConfigSelection;
  /** ENABLE_SUBNET_DISCOVERY (ignored while custom networking is on). */
  discovery: boolean;
  node: NodeSubnetFacts;
  /** Subnets as last described (discovery: the VPC/zone list; custom networking: the ENIConfig's); undefined = not described. */
  subnets?: Ec2Subnet[];
  /** Marks by subnet id (expired ones are ignored). */
  exhausted: ReadonlyMap<string, ExhaustedMark>;
  /** ms epoch. */
  now: number;
}

/**
 * Whether subnet discovery may put ENIs in `s`: tag `kubernetes.io/role/cni` = `0`
 * excludes any subnet; the node's own subnet is otherwise eligible untagged; any other
 * subnet needs the tag with a value other than `0` (upstream documents `1`). A tagged
 * subnet with `cni.networking.k8s.aws/cluster/*` tags serves only the cluster named by
 * one of them (checked when `clusterName`, CLUSTER_NAME, is set), as upstream v1.22.1.
 */
export function discoveryEligible(
  s: Pick<Ec2Subnet, 'subnetId' | 'tags'>,
  nodeSubnetId: string,
  clusterName?: string,
): boolean {
  const v = s.tags[CNI_ROLE_TAG];
  if (v === '0') return false;
  if (v === undefined) return s.subnetId === nodeSubnetId;
  if (!clusterName) return true;
  const clusterTags = Object.keys(s.tags).filter((k) => k.startsWith(CLUSTER_SUBNET_TAG_PREFIX));
  return clusterTags.length === 0 || clusterTags.includes(`${CLUSTER_SUBNET_TAG_PREFIX}${clusterName}`);
}

/** Candidates by most free addresses first; ties and undescribed ones keep their input order (stable). */
export function rankByFree(c: PlacementCandidate[]): PlacementCandidate[] {
  return c
    .map((x, i) => ({ x, i }))
    .sort((a, b) => (b.x.availableIps ?? -1) - (a.x.availableIps ?? -1) || a.i - b.i)
    .map((e) => e.x);
}

/** Whether `subnetId` holds an unexpired exhausted mark at `now` (ms epoch). */
export function isExhaustedAt(exhausted: ReadonlyMap<string, ExhaustedMark>, subnetId: string, now: number): boolean {
  const m = exhausted.get(subnetId);
  return !!m && m.untilMs > now;
}

/**
 * Operator text for "every candidate subnet is exhausted", listing each with EC2's code.
 * One subnet keeps the single-subnet wording (`the subnet has no free addresses (EC2
 * <code> for <id>)`); several are listed. `retryInMs`: until the first mark expires (omit: no pause named).
 */
export function exhaustedReason(list: Array<{ subnetId: string; code: string }>, retryInMs?: number): string {
  const pause = retryInMs === undefined ? '' : `; grow paused for ${Math.max(Math.round(retryInMs / 1000), 0)} s`;
  if (list.length === 1)
    return `the subnet has no free addresses (EC2 ${list[0]!.code} for ${list[0]!.subnetId})${pause}`;
  const names = list.map((e) => `${e.subnetId} (${e.code})`).join(', ');
  return `every eligible subnet has no free addresses: ${names}${pause}`;
}

/**
 * The ordered candidates for the next ENI, or why none may be created: the ENIConfig is
 * missing/invalid/unknown (`kind: 'eniconfig'`, its reason), or every candidate is
 * exhausted (`kind: 'subnets_exhausted'`, listing them). With custom networking, a subnet
 * whose CIDR is unknown (not described yet) is left out; if that leaves none the plan is
 * `unavailable` (a transient failure: the caller retries). Pure.
 */
export function planPlacement(f: PlacementFacts): PlacementPlan {
  const { selection: sel, node } = f;
  const described = new Map((f.subnets ?? []).map((s) => [s.subnetId, s]));
  let all: PlacementCandidate[];
  let source: string;
  if (sel.state === 'ok') {
    source = `ENIConfig "${sel.name}" (${sel.selectedBy})`;
    const sgs = sel.securityGroupIds.length ? sel.securityGroupIds : node.securityGroupIds;
    all = [];
    for (const id of sel.subnetIds) {
      const d = described.get(id);
      const cidr = d?.cidr ?? (id === node.subnetId ? node.cidr : undefined);
      if (!cidr) continue;
      all.push({
        subnetId: id,
        cidr,
        ...(d ? { availableIps: d.availableIps } : {}),
        securityGroupIds: [...sgs],
      });
    }
    if (all.length === 0)
      return {
        ok: false,
        kind: 'unavailable',
        reason: `the subnets of ENIConfig "${sel.name}" (${sel.subnetIds.join(', ')}) could not be described`,
      };
  } else if (sel.state !== 'off') {
    return {
      ok: false,
      kind: 'eniconfig',
      reason: `custom networking: ${sel.reason} (ENIConfig${sel.name ? ` "${sel.name}"` : ''}, ${sel.selectedBy}); no ENI is created`,
    };
  } else if (f.discovery && f.subnets) {
    source = 'subnet discovery';
    const nodeDescribed = described.get(node.subnetId);
    const list = f.subnets.filter(
      (s) =>
        s.vpcId === node.vpcId &&
        (!s.availabilityZone || s.availabilityZone === node.availabilityZone) &&
        discoveryEligible(s, node.subnetId, node.clusterName),
    );
    // The node subnet first among equals; it is always in the describe of its own VPC and zone.
    list.sort((a, b) => Number(b.subnetId === node.subnetId) - Number(a.subnetId === node.subnetId));
    all = list.map((s) => ({
      subnetId: s.subnetId,
      cidr: s.cidr,
      availableIps: s.availableIps,
      securityGroupIds: [...node.securityGroupIds],
    }));
    if (all.length === 0)
      return {
        ok: false,
        kind: 'subnets_exhausted',
        reason:
          `subnet discovery found no eligible subnet in ${node.vpcId} ${node.availabilityZone}` +
          `${nodeDescribed?.tags[CNI_ROLE_TAG] === '0' ? ` (the node subnet ${node.subnetId} is tagged ${CNI_ROLE_TAG}=0)` : ''}` +
          `: tag one with ${CNI_ROLE_TAG}=1`,
      };
  } else {
    // Discovery off, or its describe failed: the node subnet, as upstream falls back.
    source = f.discovery ? 'node subnet (subnet discovery unavailable)' : 'node subnet';
    const d = described.get(node.subnetId);
    all = [
      {
        subnetId: node.subnetId,
        cidr: node.cidr,
        ...(d ? { availableIps: d.availableIps } : {}),
        securityGroupIds: [...node.securityGroupIds],
      },
    ];
  }
  // A subnet DescribeSubnets shows without a single free address cannot take an ENI (its primary IP): no call.
  const empty = (c: PlacementCandidate): boolean => c.availableIps === 0;
  const open = all.filter((c) => !isExhaustedAt(f.exhausted, c.subnetId, f.now) && !empty(c));
  if (open.length === 0) {
    const list = all.map((c) => ({
      subnetId: c.subnetId,
      code: isExhaustedAt(f.exhausted, c.subnetId, f.now)
        ? f.exhausted.get(c.subnetId)!.code
        : 'AvailableIpAddressCount 0',
    }));
    const marks = all.flatMap((c) =>
      isExhaustedAt(f.exhausted, c.subnetId, f.now) ? [f.exhausted.get(c.subnetId)!.untilMs] : [],
    );
    const retryIn = marks.length ? Math.min(...marks) - f.now : undefined;
    return { ok: false, kind: 'subnets_exhausted', reason: exhaustedReason(list, retryIn) };
  }
  return { ok: true, candidates: rankByFree(open), source };
}
