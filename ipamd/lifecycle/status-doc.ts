/**
 * The `GET /v1/status` document (observability/introspection.ts): ipamd's own view for
 * operators and tests — pool counts and targets, ENIs, why releases are frozen, waiting
 * ADDs, the ENIConfig selection, exhausted subnets, the ENI lifecycle, node sysctls,
 * quarantined IPs and the evidence sources. Computed per request from the daemon's parts.
 */
import { wallOf } from '../clock.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { DatastoreViews } from '../datastore/roles.js';
import { poolCounts } from '../pool/index.js';
import type { NodeInventory } from '../startup/discover.js';
import type { EniConfigWiring } from '../startup/eniconfig-wiring.js';
import type { EniLifecycle } from '../controller/eni-lifecycle/start.js';
import type { Evidence } from '../restore/evidence.js';
import type { PoolWiring } from '../startup/pool-wiring.js';
import type { SysctlCheck } from '../network/sysctl.js';
import type { V6State } from '../datastore/ipv6-allocations.js';
import { ipv6Counts, podCount } from '../observability/introspect-family.js';

/** What the document is read from; `lifecycle` and `sysctls` are asked at each request (they start later). */
export interface StatusParts {
  inv: NodeInventory;
  ds: DatastoreViews;
  gate: ReleaseGate;
  wiring: Pick<PoolWiring, 'targets' | 'limits' | 'pool' | 'exhaustedSubnets'>;
  eniConfig: EniConfigWiring;
  evidence: Evidence;
  lifecycle: () => EniLifecycle | undefined;
  sysctls: () => SysctlCheck[] | undefined;
  /** `ipv6`/`dual` mode: the IPv6 allocations' state at `now` (ms); omit in `ipv4` mode. */
  ipv6?: (now: number) => V6State;
}

/**
 * The status document at `now` (epoch ms); times in it are ISO 8601. `counts` are the IPv4
 * pool's, plus `pods` (attachments holding an address of any family) and, in `ipv6`/`dual`
 * mode, `ipv6` (introspect-family.ts).
 */
export function statusDocument(p: StatusParts, now: number) {
  const { inv, ds, gate, evidence } = p;
  const { targets, limits, pool } = p.wiring;
  const v6 = p.ipv6?.(now);
  return {
    instanceId: inv.instance.instanceId,
    instanceType: inv.instance.instanceType,
    counts: {
      ...ds.counts(now),
      pods: podCount(ds.allocations(), v6?.allocations),
      ...(v6 ? { ipv6: ipv6Counts(v6) } : {}),
    },
    pool: poolCounts(ds.poolViews(now), targets),
    targets,
    limits,
    enis: ds.poolViews(now),
    releasesFrozen: gate.frozen,
    freezeReasons: gate.describe(),
    waitingAdds: pool.waiting,
    lastPoolError: pool.lastError ?? null,
    vpcCidrs: inv.vpcCidrs,
    eniConfig: p.eniConfig.current(),
    exhaustedSubnets: p.wiring.exhaustedSubnets().map((m) => ({
      subnetId: m.subnetId,
      code: m.code,
      until: new Date(wallOf(m.untilMs)).toISOString(),
    })),
    eniLifecycle: p.lifecycle()?.status() ?? null,
    nodeSysctls: p.sysctls() ?? null,
    quarantinedIps: ds.quarantined().map((q) => ({ ...q, since: new Date(wallOf(q.since)).toISOString() })),
    evidence: {
      criEndpoint: evidence.criEndpoint,
      kubernetes: evidence.kubeConfigured,
      kernel: evidence.kernelSource,
      passes: evidence.stats.passes,
      sources: evidence.sourceStates()?.sources ?? null,
      lastPass: evidence.stats.last ?? null,
      lastPassAt: evidence.stats.lastAt ?? null,
    },
  };
}
