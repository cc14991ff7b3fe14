/**
 * NodePort connection-mark metrics (ipamd/network/connmark.ts), with amazon-vpc-cni-k8s's
 * names, types and labels: `awscni_connmark_backend{backend}` (1 on the backend in use:
 * always `iptables` here, since ipamd writes the mark rules with iptables on whichever
 * x_tables or nf_tables backend the node uses; amazon-vpc-cni-k8s's `nftables` means its
 * native nftables writer, which ipamd does not have) and
 * `awscni_connmark_reconcile_total{result}` (`success`, `error`: each apply or removal of
 * the rules, at start and at every VPC CIDR change). Both absent without host networking.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { MetricsSources } from './sources.js';

/** Registers the connmark metrics on `registry`, read at scrape time from `src().connmark`. */
export function registerConnmarkMetrics(registry: Registry, src: () => MetricsSources | undefined): void {
  const registers = [registry];
  new Gauge({
    name: 'awscni_connmark_backend',
    help: 'The connmark backend in use; the active backend series is 1',
    labelNames: ['backend'],
    registers,
    collect() {
      this.reset();
      if (src()?.connmark?.()) this.set({ backend: 'iptables' }, 1);
    },
  });
  new Counter({
    name: 'awscni_connmark_reconcile_total',
    help: 'Connection-mark (NodePort support) rule reconciles (apply or removal) by result',
    labelNames: ['result'],
    registers,
    collect() {
      const c = src()?.connmark?.();
      this.reset();
      if (!c) return;
      this.inc({ result: 'success' }, c.success);
      this.inc({ result: 'error' }, c.error);
    },
  });
}
