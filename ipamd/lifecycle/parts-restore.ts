/**
 * ipamd's first parts: what start-up reads and restores before anything is served
 * (metrics, discovery, the datastore, the checkpoint, the DEL spool, the evidence
 * sources). Each is a part of lifecycle/runner.ts; daemon.ts lists them in order.
 */
import path from 'node:path';
import { monoNow } from '../clock.js';
import { readBootId } from '../checkpoint/index.js';
import { acquireSpawnHelper, traceSpawn } from '../cni-exec/spawn-helper.js';
import { DelSpool } from '../cni-exec/spool-applier.js';
import { spoolDirFor } from '../cni-exec/spool.js';
import type { IpamdConfig } from '../config.js';
import { ReleaseGate } from '../controller/release/release-gate.js';
import { Datastore } from '../datastore/datastore.js';
import type { Logger } from '../log.js';
import { createMetrics } from '../observability/metrics.js';
import { KernelSource } from '../restore/kernel-source.js';
import { createIpRunner } from '../../netfacts/ip-batch.js';
import { planAdoption } from '../startup/adopt.js';
import { markAwsNodeCheckpointImported } from '../startup/aws-node-import.js';
import { openCheckpointState } from '../startup/checkpoint-state.js';
import { watchCloudAnswers } from '../cloud/cloud-answers.js';
import { discoverNode, loadInventory, prefixDelegationRefusal } from '../startup/discover.js';
import { startEvidence } from '../restore/evidence.js';
import { ipv6PrefixRefusal } from '../startup/ipv6-prefix.js';
import { checkpointCoverage, startInventoryCache } from '../startup/fast-start.js';
import { DaemonPhase, type DaemonParts } from './daemon-registry.js';
import { partOf } from './runner.js';

/** What every part is built with: the config, the log, and when the start began (monoNow ms). */
export interface PartEnv {
  config: IpamdConfig;
  log: Logger;
  t0: number;
}

const part = partOf<DaemonParts>();
const dirOf = (config: IpamdConfig) => path.dirname(config.checkpointPath);

/** The metrics registry (DISABLE_METRICS: no process metrics, no event-loop sampler) and the EC2 answer watch. */
export const metricsPart = ({ config, log }: PartEnv) =>
  part({
    name: 'metrics',
    needs: [],
    start: () => {
      const metrics = createMetrics({ processMetrics: !config.disableMetrics });
      return { value: { metrics, ...watchCloudAnswers(log, metrics) } };
    },
  });

/** The daemon's phase (daemon-registry.ts). */
export const phasePart = () => part({ name: 'phase', needs: [], start: () => ({ value: new DaemonPhase() }) });

/**
 * Discovery: the instance, its limits and ENIs (from the cached inventory on a fast
 * restart of the same boot: startup/fast-start.ts). Refuses prefix delegation where the
 * instance cannot do it. Stop: the EC2 and IMDS clients close.
 */
export const nodePart = ({ config, log }: PartEnv) =>
  part({
    name: 'node',
    needs: ['metrics'],
    async start({ metrics: { metrics, ec2Hooks } }) {
      const bootId = readBootId();
      const inv = await discoverNode({
        imdsEndpoint: config.imdsEndpoint,
        ...(config.ec2Endpoint ? { ec2Endpoint: config.ec2Endpoint } : {}),
        log,
        limitsCacheFile: path.join(dirOf(config), 'instance-limits.json'),
        // Same boot, ENIs unchanged: serve from the cached inventory, EC2 confirms in the background (startup/fast-start.ts).
        // Not where no ENI reconcile runs to confirm it (IPv6 mode, no provisioning): its freeze would never lift.
        ...(config.disableNetworkResourceProvisioning || config.ipFamily === 'ipv6' || !config.fastRestart
          ? {}
          : {
              inventoryCache: {
                file: path.join(dirOf(config), 'eni-inventory.json'),
                bootId,
                check: checkpointCoverage(config.checkpointPath, bootId),
              },
            }),
        ec2Options: {
          ratePerSecond: config.ec2RatePerSecond,
          burst: config.ec2Burst,
          timeoutMs: config.ec2TimeoutMs,
          maxAttempts: config.ec2MaxAttempts,
          ...metrics.ec2,
          ...ec2Hooks,
        },
      });
      const refusal =
        config.ipFamily !== 'ipv4'
          ? ipv6PrefixRefusal(inv.limits, config.ipFamily)
          : config.enablePrefixDelegation
            ? prefixDelegationRefusal(inv.limits)
            : undefined;
      if (refusal) {
        inv.ec2.close();
        throw new Error(refusal);
      }
      const unit: 'ip' | 'prefix' = config.enablePrefixDelegation ? 'prefix' : 'ip';
      return {
        value: { inv, bootId, unit },
        stop: () => {
          inv.ec2.close();
          inv.imds.close();
        },
      };
    },
  });

/** The datastore, loaded with the discovered ENIs; half-done ENI work is not served from until the reconcile finishes it. */
export const datastorePart = ({ config }: PartEnv) =>
  part({
    name: 'datastore',
    needs: ['node'],
    start({ node: { inv, unit } }) {
      // Custom networking: the primary ENI's addresses serve no new pod (those held from the checkpoint keep serving).
      const ds = new Datastore(config.ipCooldownMs, unit, { primaryServesNewPods: !config.customNetworkCfg });
      const adoption = planAdoption(inv);
      loadInventory(ds, { ...inv, managed: adoption.load }, monoNow());
      return { value: { ds, adoption } };
    },
  });

/** The release gate (frozen or not), each change logged. */
export const releaseGatePart = ({ log }: PartEnv) =>
  part({
    name: 'release-gate',
    needs: [],
    start() {
      const gate = new ReleaseGate();
      gate.onChange((frozen, reasons) =>
        frozen ? log.warn({ reasons }, 'releases frozen') : log.info('releases unfrozen'),
      );
      return { value: gate };
    },
  });

/** The ENI inventory cache a fast restart serves from, kept in step (startup/fast-start.ts). */
export const inventoryCachePart = ({ config, log }: PartEnv) =>
  part({
    name: 'inventory-cache',
    needs: ['node', 'datastore', 'release-gate'],
    start({ node: { inv, bootId }, datastore: { ds }, 'release-gate': gate }) {
      const file = path.join(dirOf(config), 'eni-inventory.json');
      const cache = startInventoryCache({ file, bootId, inv, ds, gate, log });
      return { value: cache, stop: () => cache.stop() };
    },
  });

/** The checkpoint: loaded (or imported from aws-node), restored into the datastore, its writer open; stop flushes. */
export const checkpointPart = ({ config, log }: PartEnv) =>
  part({
    name: 'checkpoint',
    needs: ['node', 'datastore', 'release-gate'],
    async start({ node: { inv, bootId }, datastore: { ds }, 'release-gate': gate }) {
      const state = await openCheckpointState({
        config,
        ds,
        gate,
        log,
        bootId,
        maxEnis: inv.limits.maxEnis,
        ipv4PerEni: inv.limits.ipv4PerEni,
      });
      return { value: state, stop: () => state.writer.flush() };
    },
  });

/** DELs the shim spooled while ipamd was down, applied now (before the first evidence pass, so none is adopted). */
export const delSpoolPart = ({ config, log }: PartEnv) =>
  part({
    name: 'del-spool',
    needs: ['checkpoint', 'datastore', 'metrics'],
    async start({ checkpoint: { writer }, datastore: { ds }, metrics: { metrics } }) {
      const spool = new DelSpool({
        dir: spoolDirFor(config.cniExecSocket),
        ds,
        persist: () => writer.commit(),
        log,
        registry: metrics.registry,
        vethPrefix: config.vethPrefix,
        ...(config.cniExecNetns ? { nodeNetns: config.cniExecNetns } : {}),
      });
      await spool.applyPending('startup');
      return { value: spool, stop: () => spool.stop() };
    },
  });

/** Renames aws-node's checkpoint once imported into ours (a failed rename is logged, not fatal). */
export const awsNodeImportPart = ({ config, log }: PartEnv) =>
  part({
    name: 'aws-node-import',
    needs: ['checkpoint'],
    async start({ checkpoint: { fromAwsNode } }) {
      if (fromAwsNode?.kind === 'imported') {
        const to = await markAwsNodeCheckpointImported(config.awsNodeCheckpointPath).catch(
          (e: Error) => `not renamed: ${e.message}`,
        );
        log.info({ renamedTo: to }, 'aws-node checkpoint imported into ours');
      }
      return { value: undefined };
    },
  });

/**
 * One kernel source for the evidence passes and for CNI GC (both check it before
 * releasing). Its `ip` starts from the spawn helper (ipamd does not fork; the CNI exec
 * server shares the helper); stop releases the helper.
 */
export const kernelPart = ({ config }: PartEnv) =>
  part({
    name: 'kernel',
    needs: [],
    start() {
      const kernelSpawn = acquireSpawnHelper(traceSpawn);
      const kernelIp = createIpRunner(kernelSpawn.spawner);
      const kernel = new KernelSource({
        ...(config.cniExecNetns ? { netnsPath: config.cniExecNetns } : {}),
        ipRunner: () => kernelIp,
        ipv6: config.ipFamily !== 'ipv4',
      });
      return { value: kernel, stop: () => kernelSpawn.stop() };
    },
  });

/**
 * The evidence sources (CRI, Kubernetes, kernel) and the first pass, unless this boot's
 * own checkpoint lets ipamd serve at once (then the pass waits until it serves).
 */
export const evidencePart = ({ config, log, t0 }: PartEnv) =>
  part({
    name: 'evidence',
    needs: ['datastore', 'release-gate', 'kernel', 'checkpoint', 'del-spool', 'node', 'phase', 'ipv6'],
    async start({ datastore: { ds }, 'release-gate': gate, kernel, checkpoint, node: { bootId }, phase, ipv6 }) {
      const { load, fromAwsNode, recordedIdentity, writer } = checkpoint;
      // Our own checkpoint from this boot holds every acknowledged allocation: serve without waiting for the first evidence pass.
      const serveAtOnce =
        config.fastRestart && load.kind === 'ok' && load.data.bootId === bootId && fromAwsNode?.kind !== 'imported';
      const evidence = await startEvidence({
        config,
        ds,
        gate,
        log,
        kernel,
        persist: () => writer.commit(),
        serveAtOnce,
        startAfter: phase.serving,
        ...(recordedIdentity ? { recordedIdentity } : {}),
        ...(ipv6
          ? {
              v6: {
                v6: ipv6.v6,
                persist: () => ipv6.writer.commit(),
                dual: config.ipFamily === 'dual',
                vethPrefix: config.vethPrefix,
              },
            }
          : {}),
      });
      checkpoint.setRuntimeIdentity(evidence.runtimeIdentity);
      return { value: { evidence, nodeInitMs: monoNow() - t0 }, stop: () => evidence.stop() };
    },
  });
