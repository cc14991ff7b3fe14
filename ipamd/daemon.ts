/**
 * Wires ipamd together as a list of parts (lifecycle/runner.ts): each names what it needs,
 * the runner starts them in that order and stops them in reverse, and a start that fails
 * part way stops exactly what had started (docs/design.md#18-a-declared-lifecycle).
 * `ipamd-main.ts` only parses the environment and handles signals; everything with a
 * lifetime is a part listed here.
 */
import path from 'node:path';
import { monoNow } from './clock.js';
import type { PluginHost } from '../cni-plugin/facade.js';
import type { IpamdConfig } from './config.js';
import type { PoolController } from './controller/pool-loop/pool-controller.js';
import type { ReleaseGate } from './controller/release/release-gate.js';
import type { Datastore } from './datastore/datastore.js';
import type { Logger } from './log.js';
import { acquireCheckpointLock, whileHoldingCheckpointLock, type CheckpointLock } from './startup/checkpoint-lock.js';
import { selfHolder } from './startup/guard-holder.js';
import type { DaemonParts } from './lifecycle/daemon-registry.js';
import { startParts, type AnyPart } from './lifecycle/runner.js';
import {
  awsNodeImportPart,
  checkpointPart,
  datastorePart,
  delSpoolPart,
  evidencePart,
  inventoryCachePart,
  kernelPart,
  metricsPart,
  nodePart,
  phasePart,
  releaseGatePart,
  type PartEnv,
} from './lifecycle/parts-restore.js';
import {
  cniExecPart,
  cniInstallPart,
  eniConfigPart,
  hostNetworkPart,
  httpEndpointsPart,
  metricsSourcesPart,
  pluginLogsPart,
  poolPart,
  quarantineCheckPart,
  rpcPart,
  servicePart,
  spoolWatchPart,
  statusPart,
} from './lifecycle/parts-serve.js';
import { egressV4Part, familyPart, ipv6Part } from './lifecycle/parts-ipv6.js';
import { npaConfigPart } from './lifecycle/parts-npa.js';
import {
  cooldownEvidencePart,
  drainPart,
  eniConfigFollowPart,
  kubeReportingPart,
  nodeSchedulePart,
  poolLoopPart,
  servingPart,
  stopGracePart,
} from './lifecycle/parts-run.js';

/** A running daemon. */
export interface Daemon {
  ds: Datastore;
  gate: ReleaseGate;
  pool: PoolController;
  /** The host the CNI exec server hands the plugin code (undefined when ENI_IPAM_CNI_EXEC=false). */
  pluginHost: PluginHost | undefined;
  /**
   * The TCP port the introspection server bound (the one asked for, or the kernel's pick
   * for port 0); undefined when introspection is disabled.
   */
  introspectionPort: number | undefined;
  /** Stops taking new RPCs, finishes in-flight ones (up to `graceMs`), flushes the checkpoint. */
  stop(graceMs?: number): Promise<void>;
}

/** Part names, for {@link StartDaemonOptions.failAt}. */
export type DaemonPartName = keyof DaemonParts;

/** Options of {@link startDaemon}. */
export interface StartDaemonOptions {
  /** Test-only: the start of this part throws (nothing of it starts): what had started must be stopped. */
  failAt?: DaemonPartName;
  /** The state directory's lock, already taken by the caller (ipamd-main, before its log); default: taken here. */
  checkpointLock?: CheckpointLock;
}

/**
 * ipamd's parts, in start order (each also after what it needs; the stop runs in
 * reverse). The edges that keep the start-up guarantees (spool before evidence, no
 * serving before restore and host networking, …) are in each part's `needs`.
 */
export function daemonParts(env: PartEnv): AnyPart<DaemonParts>[] {
  return [
    metricsPart(env),
    phasePart(),
    nodePart(env),
    // The network policy agent asks once at start and exits without an answer: served from discovery on.
    npaConfigPart(env),
    datastorePart(env),
    releaseGatePart(env),
    inventoryCachePart(env),
    checkpointPart(env),
    delSpoolPart(env),
    awsNodeImportPart(env),
    kernelPart(env),
    eniConfigPart(env),
    nodeSchedulePart(env),
    hostNetworkPart(env),
    egressV4Part(env),
    poolPart(env),
    servicePart(env),
    ipv6Part(env),
    // The evidence also judges the IPv6 allocations (restore/v6-evidence.ts): after ipv6.
    evidencePart(env),
    familyPart(env),
    quarantineCheckPart(env),
    cooldownEvidencePart(env),
    metricsSourcesPart(env),
    statusPart(env),
    httpEndpointsPart(env),
    rpcPart(env),
    pluginLogsPart(env),
    cniExecPart(env),
    spoolWatchPart(),
    cniInstallPart(env),
    stopGracePart(),
    poolLoopPart(env),
    drainPart(),
    kubeReportingPart(env),
    eniConfigFollowPart(),
    servingPart(env),
  ];
}

/**
 * Starts ipamd with a validated config. First takes the node's one-ipamd lock on the
 * checkpoint directory (startup/checkpoint-lock.ts: a flock every ipamd sharing the
 * directory meets, in any network namespace), before anything on the node is read or
 * written, unless `opts.checkpointLock` brings it; {@link Daemon.stop}, or a failed start, frees it. A start that fails stops
 * every part that had started, in reverse, before it throws.
 * @throws Error when another ipamd holds the checkpoint directory or serves on the socket,
 *         discovery fails after its retries, or a setting cannot work on this instance
 *         (the message says which).
 */
export async function startDaemon(config: IpamdConfig, log: Logger, opts: StartDaemonOptions = {}): Promise<Daemon> {
  const dir = path.dirname(config.checkpointPath);
  const lock =
    opts.checkpointLock ??
    (await acquireCheckpointLock(
      dir,
      selfHolder({ socket: config.socketPath, checkpoint: config.checkpointPath, logFile: config.logFile }),
    ));
  return whileHoldingCheckpointLock(dir, () => startLocked(config, log, opts), lock);
}

async function startLocked(config: IpamdConfig, log: Logger, opts: StartDaemonOptions): Promise<Daemon> {
  const parts = await startParts(daemonParts({ config, log, t0: monoNow() }), {
    log,
    failedStartStop: { graceMs: 0 },
    failAt: opts.failAt,
  });
  const { ds, gate, pool } = { ...parts.get('datastore'), gate: parts.get('release-gate'), ...parts.get('pool') };
  return {
    ds,
    gate,
    pool,
    pluginHost: parts.get('cni-exec').server?.pluginHost,
    introspectionPort: parts.get('http-endpoints').introspectionPort,
    async stop(graceMs = 10_000) {
      await parts.stop({ graceMs });
      log.info('ipamd stopped');
    },
  };
}
