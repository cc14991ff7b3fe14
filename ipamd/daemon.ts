/**
 * Wires ipamd together: discovery → datastore → checkpoint restore → pool controller →
 * gRPC server → introspection. `main.ts` only parses the environment and handles
 * signals; everything with a lifetime is started and stopped here.
 */
import { monoNow } from './clock.js';
import path from 'node:path';
import { readBootId } from './checkpoint/index.js';
import { CniExecServer } from './cni-exec/server.js';
import { watchCloudAnswers } from './startup/cloud-answers.js';
import { acquireSpawnHelper, traceSpawn } from './cni-exec/spawn-helper.js';
import type { PluginHost } from '../cni-plugin/facade.js';
import { DelSpool } from './cni-exec/spool-applier.js';
import { spoolDirFor } from './cni-exec/spool.js';
import type { IpamdConfig } from './config.js';
import type { PoolController } from './controller/pool-loop/pool-controller.js';
import { ReleaseGate } from './controller/release/release-gate.js';
import { kernelRoutedReader, startQuarantineCheck } from './controller/pool-loop/quarantine-check.js';
import { Datastore } from './datastore/datastore.js';
import type { Logger } from './log.js';
import { enisDocument } from './observability/introspect-enis.js';
import { ipamdEnvSettings, networkEnvSettings } from './observability/env-settings.js';
import { createMetrics } from './observability/metrics.js';
import type { KubeReporter } from './observability/kube-reporter.js';
import { startKubeReportingWhenServing } from './startup/kube-reporting-start.js';
import { PluginLogFiles } from './observability/log-files.js';
import { StalledParts } from './observability/stalled-parts.js';
import { statusDocument } from './observability/status-doc.js';
import { RpcServer } from './rpc/server.js';
import { IpamService, routeTableFor } from './service/ipam-service.js';
import { stageTrace } from './service/stage-trace.js';
import { discoverNode, loadInventory, prefixDelegationRefusal, readVpcCidrs } from './startup/discover.js';
import { planAdoption } from './startup/adopt.js';
import { buildPool } from './startup/pool-wiring.js';
import { startEniLifecycle, type EniLifecycle } from './startup/eni-lifecycle.js';
import { installCniAndReport } from './startup/cni-install-report.js';
import { startHostNetworkSync } from './startup/host-network-sync.js';
import { startHttpEndpoints } from './startup/http-endpoints.js';
import { startEvidence } from './startup/evidence.js';
import { startEniConfig } from './startup/eniconfig-wiring.js';
import { KernelSource } from './restore/kernel-source.js';
import { createIpRunner } from '../netfacts/ip-batch.js';
import { openCheckpointState } from './startup/checkpoint-state.js';
import { markAwsNodeCheckpointImported } from './startup/aws-node-import.js';
import { checkpointCoverage, confirmJitterMs, startInventoryCache } from './startup/fast-start.js';
import { whileHoldingCheckpointLock } from './startup/checkpoint-lock.js';

/**
 * How long a stop lets ADDs waiting on a refill and EC2 calls in flight finish before it
 * fails and aborts them (ms); well within the shutdown deadline (shutdown.ts).
 */
const EC2_STOP_GRACE_MS = 3000;

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

/**
 * Starts ipamd with a validated config. First takes the node's one-ipamd lock on the
 * checkpoint directory (startup/checkpoint-lock.ts), before anything on the node is read
 * or written; {@link Daemon.stop}, or a failed start, frees it.
 * @throws Error when another ipamd holds the checkpoint directory or serves on the socket,
 *         discovery fails after its retries, or a setting cannot work on this instance
 *         (the message says which).
 */
export async function startDaemon(config: IpamdConfig, log: Logger): Promise<Daemon> {
  return whileHoldingCheckpointLock(path.dirname(config.checkpointPath), () => startLocked(config, log));
}

async function startLocked(config: IpamdConfig, log: Logger): Promise<Daemon> {
  const t0 = monoNow();
  const processStart = performance.timeOrigin;
  const bootId = readBootId();
  // With DISABLE_METRICS nothing scrapes the registry: no process metrics, no event-loop sampler.
  const metrics = createMetrics({ processMetrics: !config.disableMetrics });
  const { throttle, ec2Hooks } = watchCloudAnswers(log, metrics);
  const inv = await discoverNode({
    imdsEndpoint: config.imdsEndpoint,
    ...(config.ec2Endpoint ? { ec2Endpoint: config.ec2Endpoint } : {}),
    log,
    limitsCacheFile: path.join(path.dirname(config.checkpointPath), 'instance-limits.json'),
    // Same boot, ENIs unchanged: serve from the cached inventory, EC2 confirms in the background (startup/fast-start.ts).
    ...(config.disableNetworkResourceProvisioning || !config.fastRestart
      ? {}
      : {
          inventoryCache: {
            file: path.join(path.dirname(config.checkpointPath), 'eni-inventory.json'),
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
  const unit = config.enablePrefixDelegation ? 'prefix' : 'ip';
  const refusal = config.enablePrefixDelegation ? prefixDelegationRefusal(inv.limits) : undefined;
  if (refusal) {
    inv.ec2.close();
    throw new Error(refusal);
  }
  // Custom networking: the primary ENI's addresses serve no new pod (those held from the checkpoint keep serving).
  const ds = new Datastore(config.ipCooldownMs, unit, { primaryServesNewPods: !config.customNetworkCfg });
  // Half-done ENI work (crash, IMDS lag) is not served from until the reconcile finishes it.
  const adoption = planAdoption(inv);
  loadInventory(ds, { ...inv, managed: adoption.load }, monoNow());

  const gate = new ReleaseGate();
  gate.onChange((frozen, reasons) =>
    frozen ? log.warn({ reasons }, 'releases frozen') : log.info('releases unfrozen'),
  );
  const inventoryCache = startInventoryCache({
    file: path.join(path.dirname(config.checkpointPath), 'eni-inventory.json'),
    bootId,
    inv,
    ds,
    gate,
    log,
  });
  const { load, fromAwsNode, recordedIdentity, writer, setRuntimeIdentity } = await openCheckpointState({
    config,
    ds,
    gate,
    log,
    bootId,
    maxEnis: inv.limits.maxEnis,
    ipv4PerEni: inv.limits.ipv4PerEni,
  });
  // DELs the shim spooled while ipamd was down: applied before the first evidence pass, so none is adopted.
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
  if (fromAwsNode?.kind === 'imported') {
    const to = await markAwsNodeCheckpointImported(config.awsNodeCheckpointPath).catch(
      (e: Error) => `not renamed: ${e.message}`,
    );
    log.info({ renamedTo: to }, 'aws-node checkpoint imported into ours');
  }
  // One kernel source for the evidence passes and for CNI GC (both check it before releasing).
  // Its `ip` starts from the spawn helper from the first pass on (ipamd does not fork; the CNI exec server shares the helper).
  const kernelSpawn = acquireSpawnHelper(traceSpawn);
  const kernelIp = createIpRunner(kernelSpawn.spawner);
  const kernel = new KernelSource({
    ...(config.cniExecNetns ? { netnsPath: config.cniExecNetns } : {}),
    ipRunner: () => kernelIp,
  });
  // Our own checkpoint from this boot holds every acknowledged allocation: serve without waiting for the first evidence pass.
  const serveAtOnce =
    config.fastRestart && load.kind === 'ok' && load.data.bootId === bootId && fromAwsNode?.kind !== 'imported';
  // What serving does not need (the Kubernetes client, the first evidence pass on a start that serves at once) waits until ipamd serves.
  let served = (): void => undefined;
  const serving = new Promise<void>((r) => (served = r));
  const evidence = await startEvidence({
    config,
    ds,
    gate,
    log,
    kernel,
    persist: () => writer.commit(),
    serveAtOnce,
    startAfter: serving,
    ...(recordedIdentity ? { recordedIdentity } : {}),
  });
  setRuntimeIdentity(evidence.runtimeIdentity);
  const nodeInitMs = monoNow() - t0;

  // Host networking of a new ENI is set up before its IPs can be handed out (assigned below, once started).
  let hostNet: Awaited<ReturnType<typeof startHostNetworkSync>> | undefined;
  // Custom networking: the node's ENIConfig, watched; where new ENIs go, or why none may be created.
  const eniConfig = startEniConfig(config, log);
  const { maxEni, targets, limits, enis, pool, exhaustedSubnets } = buildPool({
    config,
    inv,
    ds,
    gate,
    log,
    metrics,
    unit,
    adoption,
    eniConfig: eniConfig.current,
    eniCreationRefused: eniConfig.block,
    ...(config.hostNetworking
      ? {
          setupEni: (eni) =>
            hostNet ? hostNet.setupEni(eni) : Promise.reject(new Error('host networking is not set up yet')),
        }
      : {}),
  });
  let stopping = false; // set by stop(); a failing ADD then says ipamd is restarting
  const service = new IpamService({
    ds,
    pool,
    persist: () => writer.commit(),
    log,
    addWaitTimeoutMs: config.addWaitTimeoutMs,
    ec2Throttled: () => throttle.throttledWithin(config.addWaitTimeoutMs + 1000),
    stopping: () => stopping,
    onConflict: () => metrics.ipConflict(),
    onDel: metrics.delRequested,
    kernel,
    onAddFailed: (reason, noIp, d) => {
      metrics.addFailed(reason, noIp);
      if (noIp) reporter()?.podAddFailed({ reason, message: d.message, ...(d.pod ? { pod: d.pod } : {}) });
    },
  });
  let reporter: () => KubeReporter | undefined = () => undefined; // Events, node condition, taint: once serving
  const quarantine = startQuarantineCheck({
    ds,
    log,
    intervalMs: config.gcIntervalMs,
    read: kernelRoutedReader(config.cniExecNetns),
  });
  metrics.setSources({
    ds,
    gate,
    pool,
    quarantined: () => ds.quarantined().length,
    sysctls: () => hostNet?.sysctls() ?? [],
    connmark: () => hostNet?.connmarkReconciles(),
    limits: () => ({
      maxEni,
      // Custom networking: the primary ENI serves no pod.
      ipMax: (maxEni - (config.customNetworkCfg ? 1 : 0)) * (inv.limits.ipv4PerEni - 1) * (unit === 'prefix' ? 16 : 1),
    }),
    evidence: evidence.sourceStates,
  });
  const rpc = new RpcServer({
    socketPath: config.socketPath,
    service,
    log,
    vpcCidrs: () => inv.vpcCidrs,
    externalSnat: config.externalSnat,
    observe: metrics.observeRpc,
  });

  let lifecycle: EniLifecycle | undefined;
  // Parts that cannot make progress back off and say so here (log, metrics, /v1/status), never spin.
  const stalled = new StalledParts({ log, registry: metrics.registry });
  const status = () => ({
    ...statusDocument(
      {
        inv,
        ds,
        gate,
        wiring: { targets, limits, pool, exhaustedSubnets },
        eniConfig,
        evidence,
        lifecycle: () => lifecycle,
        sysctls: () => hostNet?.sysctls(),
      },
      monoNow(),
    ),
    stalled: stalled.list(),
  });
  const endpoints = await startHttpEndpoints(
    config,
    {
      status,
      allocations: () => ds.allocations(),
      enis: () => enisDocument(ds, routeTableFor, monoNow()),
      eniConfig: () => eniConfig.name(),
      stageTrace: () => stageTrace.summary(),
      ipamdEnv: () => ipamdEnvSettings(config),
      networkEnv: () => networkEnvSettings(config),
    },
    metrics,
  );
  hostNet = config.hostNetworking
    ? await startHostNetworkSync({
        ds,
        log,
        primaryMac: inv.instance.primaryMac,
        nodeIp: inv.instance.localIpv4,
        vpcCidrs: inv.vpcCidrs,
        eniMtu: config.eniMtu,
        externalSnat: config.externalSnat,
        excludeSnatCidrs: config.excludeSnatCidrs,
        traffic: {
          randomizeSnat: config.randomizeSnat,
          nodePortSupport: config.nodePortSupport,
          connmark: config.connmark,
          vethPrefix: config.vethPrefix,
        },
        intervalMs: 1000,
        ...(config.cniExecNetns ? { netns: config.cniExecNetns } : {}),
        vpcCidrRecheck: {
          read: () => readVpcCidrs(inv.imds, inv.instance.primaryMac),
          intervalMs: config.reconcileIntervalMs,
          onChange: (cidrs) => (inv.vpcCidrs = cidrs),
        },
      })
    : undefined;
  await rpc.listen();
  // The shim's fast path: plugin invocations run in-process (started before the conflist exists), their log rotated.
  const pluginLogs = new PluginLogFiles({ maxSize: config.logFileMaxSize, maxFiles: config.logFileMaxFiles, stalled });
  const cniExec = config.cniExec
    ? new CniExecServer({
        socketPath: config.cniExecSocket,
        log,
        ...(config.cniExecNetns ? { nodeNetns: config.cniExecNetns } : {}),
        ipamd: { socketPath: config.socketPath, client: rpc.directClient() },
        appendLog: (file, line) => pluginLogs.append(file, line),
      })
    : undefined;
  await cniExec?.listen();
  await spool.start(() => pool.trigger()); // entries spooled since the start-up pass (the socket was not there yet)
  if (config.installCni) await installCniAndReport(config, !!cniExec, log);
  if (config.disableNetworkResourceProvisioning)
    log.warn(
      'DISABLE_NETWORK_RESOURCE_PROVISIONING=true: the warm pool is not managed; serving only what the ENIs already hold',
    );
  else {
    pool.start();
    lifecycle = startEniLifecycle({
      config,
      inv,
      ds,
      gate,
      enis,
      pool,
      log,
      metrics,
      ...(inv.source === 'cache'
        ? { firstPassDelayMs: confirmJitterMs(config.restartConfirmJitterMs), onFirstOkPass: inventoryCache.confirmed }
        : {}),
    });
  }
  const reporting = startKubeReportingWhenServing(
    serving,
    { config, log, ds, gate, pool, status: () => service.status(), eniConfigBlocked: eniConfig.block },
    () => stopping,
    log,
  );
  reporter = reporting.reporter;
  eniConfig.onChange(() => {
    pool.trigger();
    reporter()?.kick();
  });
  metrics.started({
    startupSeconds: (monoNow() - processStart) / 1000,
    nodeInitSeconds: nodeInitMs / 1000,
    withApiServer: !!evidence.kubeConfigured,
  });
  log.info(
    {
      socket: config.socketPath,
      cniExecSocket: cniExec ? config.cniExecSocket : null,
      introspectionPort: endpoints.introspectionPort,
      metricsPort: endpoints.metricsPort,
      startupMs: monoNow() - t0,
      ...status().counts,
    },
    'ipamd serving',
  );
  served();

  return {
    ds,
    gate,
    pool,
    pluginHost: cniExec?.pluginHost,
    introspectionPort: endpoints.introspectionPort,
    async stop(graceMs = 10_000) {
      stopping = true;
      // What still waits on EC2 EC2_STOP_GRACE_MS into the stop is cut: ADDs waiting on a
      // refill fail (they would hold the drain), EC2 calls in flight are aborted (their
      // outcome is reconciled at the next start, as after a crash).
      const cut = setTimeout(() => {
        pool.refuseWaiting();
        inv.ec2.close();
      }, EC2_STOP_GRACE_MS);
      await reporting.ready;
      await reporter()?.stop(); // first: a stopping pool must not read as "cannot serve" (a taint)
      eniConfig.stop();
      await cniExec?.close(graceMs); // its invocations call the RPCs: they finish first
      await spool.stop();
      await rpc.shutdown(graceMs);
      await lifecycle?.stop();
      await pool.stop();
      clearTimeout(cut);
      inv.ec2.close();
      hostNet?.stop();
      inv.imds.close();
      await evidence.stop();
      await kernelSpawn.stop();
      await quarantine.stop();
      await writer.flush();
      await inventoryCache.stop();
      await pluginLogs.close();
      await endpoints.close();
      log.info('ipamd stopped');
    },
  };
}
