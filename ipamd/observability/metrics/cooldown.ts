/**
 * Cooldown metrics (issue 41, docs/design.md#cooldown-that-ends-on-evidence), sampled at
 * scrape time: `eni_ipam_cooldown_reuses_total{by}` counts addresses ADDs took after a
 * cooldown, by what ended it (`timer`: IP_COOLDOWN_PERIOD ran out; `evidence`: no
 * EndpointSlice listed it and the proxy-sync allowance had passed), and
 * `eni_ipam_cooldown_evidence_synced` is 1 while the EndpointSlice watch is synced, 0 while
 * it is not (every cooldown then runs its full period), absent with the evidence off.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { MetricsSources } from './sources.js';

/** Registers the cooldown series on `registry`; `src()` is read at each scrape. */
export function registerCooldownMetrics(registry: Registry, src: () => MetricsSources | undefined): void {
  const registers = [registry];
  new Counter({
    name: 'eni_ipam_cooldown_reuses_total',
    help: 'Addresses handed out again after a cooldown, by what ended it: timer (IP_COOLDOWN_PERIOD) or evidence (no EndpointSlice lists it and ENI_IPAM_PROXY_SYNC_ALLOWANCE passed)',
    labelNames: ['by'],
    registers,
    collect() {
      const r = src()?.ds.cooldownReuses?.() ?? { timer: 0, evidence: 0 };
      this.reset();
      this.inc({ by: 'timer' }, r.timer);
      this.inc({ by: 'evidence' }, r.evidence);
    },
  });
  new Gauge({
    name: 'eni_ipam_cooldown_evidence_synced',
    help: 'Whether the EndpointSlice watch that may end cooldowns early is synced (1) or not (0: every cooldown runs its full IP_COOLDOWN_PERIOD); absent with ENI_IPAM_COOLDOWN_EVIDENCE=false',
    registers,
    collect() {
      this.reset();
      const s = src()?.cooldownEvidence?.();
      if (s) this.set(s.synced ? 1 : 0);
    },
  });
}
