/**
 * Where new ENIs go: the contract between the ENIConfig source (custom networking,
 * `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG`), subnet discovery (`ENABLE_SUBNET_DISCOVERY`) and
 * the ENI creation path (eni-create.ts, grow-executor.ts). Types only, no behaviour.
 *
 * Flow: the ENIConfig source keeps an {@link EniConfigSelection} current (watching the
 * node's label/annotation and the ENIConfig objects); the placement (subnet-placement.ts)
 * turns it, or the node's own subnet / the discovered subnets, into an ordered list of
 * {@link PlacementCandidate}s minus the subnets marked exhausted; the create path tries
 * them in order and marks a subnet exhausted on `InsufficientFreeAddressesInSubnet` /
 * `InsufficientCidrBlocks` (docs/design.md#eni-ownership).
 */

/** The node's ENIConfig as the custom-networking source sees it now. */
export type EniConfigSelection =
  /** Custom networking is off: ENIs go to the node's subnet (or discovery). */
  | { state: 'off' }
  /** The ENIConfig the node selects, read and valid. */
  | {
      state: 'ok';
      /** ENIConfig object name (cluster-scoped, `crd.k8s.amazonaws.com/v1alpha1`). */
      name: string;
      /** What selected it, e.g. `label k8s.amazonaws.com/eniConfig=us-west-2a` or `default`. */
      selectedBy: string;
      /** `spec.subnet` first, then our `spec.subnets` list (deduplicated); never empty. */
      subnetIds: string[];
      /** `spec.securityGroups`; empty → the primary ENI's security groups. */
      securityGroupIds: string[];
    }
  /**
   * No usable ENIConfig: `missing` (no such object), `invalid` (no subnet, malformed ids),
   * `unknown` (not read yet, or the Kubernetes API unreadable). No ENI may be created.
   */
  | { state: 'missing' | 'invalid' | 'unknown'; name?: string; selectedBy: string; reason: string };

/** One subnet a new ENI may be created in. */
export interface PlacementCandidate {
  subnetId: string;
  /** IPv4 CIDR of the subnet (the ENI's route table gateway is its first host address). */
  cidr: string;
  /** Free addresses per the last DescribeSubnets (undefined when not described). */
  availableIps?: number;
  /** Security groups for an ENI created here. */
  securityGroupIds: string[];
}

/** The answer of a placement: where to try, in order, or why nothing may be created. */
export type PlacementPlan =
  | {
      ok: true;
      /** Best first; exhausted subnets already removed; never empty. */
      candidates: PlacementCandidate[];
      /** For logs and errors: `node subnet`, `subnet discovery`, `ENIConfig "x" (label …)`. */
      source: string;
    }
  | {
      ok: false;
      /** Names the ENIConfig and the label/annotation that selected it, or lists the exhausted subnets. */
      reason: string;
      /**
       * `eniconfig` and `subnets_exhausted` block the refill (waiting ADDs fail with `reason`);
       * `unavailable` is transient (the subnets could not be described yet): the creation backs off and retries.
       */
      kind: 'eniconfig' | 'subnets_exhausted' | 'unavailable';
    };

/** What the create path asks before each ENI creation. */
export interface EniPlacement {
  /** The candidates for the next ENI. Never throws: a failure to read is an `ok: false` plan. */
  plan(): Promise<PlacementPlan>;
  /** Marks `subnetId` exhausted (EC2 said so) for the configured time; `code` is the EC2 error code. */
  markExhausted(subnetId: string, code: string): void;
  /** The creation a plan was made for has ended (either way); `subnetId` = the plan's first candidate. Optional. */
  release?(subnetId: string): void;
  /** Whether `subnetId` is marked exhausted now (the grow plan assigns no more on ENIs there). Calls no API. */
  isExhausted(subnetId: string): boolean;
}
