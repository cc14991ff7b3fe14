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
}

/** The status document at `now` (epoch ms); times in it are ISO 8601. */
export function statusDocument(p: StatusParts, now: number) {
  const { inv, ds, gate, evidence } = p;
  const { targets, limits, pool } = p.wiring;
  return {
    instanceId: inv.instance.instanceId,
    instanceType: inv.instance.instanceType,
    counts: ds.counts(now),
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
