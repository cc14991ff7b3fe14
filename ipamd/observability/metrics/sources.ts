/**
 * What the scrape-time gauges read. Structural, so tests may pass plain objects; every
 * member beyond `ds.counts` and `gate` is optional (its series then reads 0 or is absent).
 */
import type { Allocation, DatastoreCounts, EniInfo, IpState } from '../../datastore/types.js';
import type { PoolEniView } from '../../pool/types.js';

/** The datastore reads the pool gauges use. */
export interface MetricsDatastore {
  counts(now: number): DatastoreCounts;
  poolViews?(now: number): PoolEniView[];
  listEnis?(): EniInfo[];
  eniIps?(eniId: string): string[];
  eniPrefixes?(eniId: string): string[];
  prefixOf?(ip: string): string | undefined;
  allocations?(): Allocation[];
  ipState?(ip: string, now: number): IpState | undefined;
  /** Addresses ADDs took after a cooldown, by what ended it (`eni_ipam_cooldown_reuses_total`). */
  cooldownReuses?(): { timer: number; evidence: number };
}

/** The sources of the scrape-time gauges. */
export interface MetricsSources {
  ds: MetricsDatastore;
  gate: { readonly frozen: boolean; describe(): string[] };
  pool?: { readonly waiting: number };
  /** ENI limit of the node (MAX_ENI capped by the instance) and the addresses those ENIs can hold for pods. */
  limits?: () => { maxEni: number; ipMax: number };
  /** Node kernel settings ipamd checks (network/sysctl.ts): `eni_ipam_node_sysctl_ok{sysctl}`. */
  sysctls?: () => Array<{ sysctl: string; ok: boolean }>;
  /** Connection-mark (NodePort) reconciles so far by result (network/connmark.ts); absent without host networking. */
  connmark?: () => { success: number; error: number } | undefined;
  /** Clock in ms (default monoNow, ipamd/clock.ts). */
  now?: () => number;
  /** How many addresses are quarantined now (`eni_ipam_quarantined_ips`). */
  quarantined?: () => number;
  /**
   * The last evidence pass: each restore source's state (`ok`, `unreadable`, `suspect`;
   * absent sources left out) and whether the release brake held. Undefined before the first pass.
   */
  evidence?: () => { sources: Record<string, 'ok' | 'unreadable' | 'suspect'>; brakeHeld: boolean } | undefined;
  /**
   * On a node serving IPv6 (`ipv6`/`dual` mode): its mode, /80 prefixes, the /128s assigned
   * and the IPv6/egress addresses quarantined. Absent in `ipv4` mode.
   */
  ipv6?: () => { mode: 'ipv6' | 'dual'; prefixes: number; assigned: number; quarantined: number };
  /**
   * Whether the node condition on the Node is what ipamd computed (its last read or write of
   * it succeeded); undefined while Kubernetes reporting is off or not started.
   */
  nodeCondition?: () => { synced: boolean } | undefined;
  /** The EndpointSlice evidence of the cooldown: synced or not; undefined with it off (ENI_IPAM_COOLDOWN_EVIDENCE=false). */
  cooldownEvidence?: () => { synced: boolean } | undefined;
}
