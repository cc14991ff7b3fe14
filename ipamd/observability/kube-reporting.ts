/**
 * Wires the {@link KubeReporter} to the daemon's parts: the Kubernetes client from the
 * same configuration the pod source uses (kube/config.ts), this node's
 * name (MY_NODE_NAME), and the facts read from memory (datastore counts, CNI STATUS, the
 * pool controller's grow block, the release gate). Off, with one log line, when
 * MY_NODE_NAME is unset or no Kubernetes configuration loads.
 */
import { monoNow } from '../clock.js';
import type { IpamdConfig } from '../config.js';
import type { PoolController } from '../controller/pool-loop/pool-controller.js';
import type { ReleaseGate } from '../controller/release/release-gate.js';
import type { DatastoreViews } from '../datastore/roles.js';
import type { Logger } from '../log.js';
import { loadKubeConfig } from '../kube/config.js';
import type { IpamStatus } from '../service/status.js';
import { KubeReporter } from './kube-reporter.js';
import { KubeWrites } from './kube-writes.js';
import type { NodeIpFacts } from './node-ip-state.js';

/** What {@link startKubeReporting} reads. */
export interface KubeReportingDeps {
  config: Pick<IpamdConfig, 'nodeName' | 'taintWhenExhausted'>;
  log: Logger;
  ds: DatastoreViews;
  gate: ReleaseGate;
  pool: Pick<PoolController, 'growBlocked'>;
  /** CNI STATUS (IpamService.status). */
  status: () => IpamStatus;
  /** Custom networking: why no ENI may be created now (the ENIConfig), or undefined. */
  eniConfigBlocked?: () => NodeIpFacts['eniConfigBlocked'];
}

/** The facts of node-ip-state.ts, from memory. */
export function readNodeIpFacts(d: Omit<KubeReportingDeps, 'config' | 'log'>, now = monoNow()): NodeIpFacts {
  const c = d.ds.counts(now);
  const st = d.status();
  const blocked = d.pool.growBlocked();
  const eniConfigBlocked = d.eniConfigBlocked?.();
  return {
    ...(eniConfigBlocked ? { eniConfigBlocked } : {}),
    canServe: st.canServe,
    serveMessage: st.message,
    available: c.available,
    ...(blocked ? { growBlocked: blocked } : {}),
    frozen: d.gate.frozen,
    freezeReasons: d.gate.describe(),
    heldByFreeze: d.gate.frozen ? c.unverified + c.releasing : 0,
  };
}

/** Starts the reporter, or returns undefined (logged) when it cannot run here. Never throws. */
export function startKubeReporting(d: KubeReportingDeps): KubeReporter | undefined {
  const nodeName = d.config.nodeName;
  if (!nodeName) {
    d.log.info('MY_NODE_NAME is not set: no Kubernetes Events, node condition or taint');
    return undefined;
  }
  let kc;
  try {
    kc = loadKubeConfig().kc;
  } catch (e) {
    d.log.warn({ err: (e as Error).message }, 'no Kubernetes configuration: no Events, node condition or taint');
    return undefined;
  }
  const reporter = new KubeReporter({
    writes: new KubeWrites(kc, nodeName),
    nodeName,
    log: d.log,
    taintWhenExhausted: d.config.taintWhenExhausted,
    facts: () => readNodeIpFacts(d),
  });
  d.gate.onChange(() => reporter.kick());
  reporter.start();
  return reporter;
}
