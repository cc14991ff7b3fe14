/**
 * ipamd's serving parts: the ENIConfig selection, host networking, the pool, the IPAM
 * service, the introspection and metrics endpoints, the gRPC server, the CNI exec server
 * and the CNI install. Each is a part of lifecycle/runner.ts; daemon.ts lists them.
 */
import { monoNow } from '../clock.js';
import { CniExecServer } from '../cni-exec/server.js';
import { kernelRoutedReader, startQuarantineCheck } from '../controller/pool-loop/quarantine-check.js';
import { ipamdEnvSettings, networkEnvSettings } from '../observability/env-settings.js';
import { enisDocument } from '../observability/introspect-enis.js';
import { ipv6CidrsDocument } from '../observability/introspect-ipv6.js';
import { familyAllocations } from '../observability/introspect-family.js';
import { PluginLogFiles } from '../observability/log-files.js';
import { StalledParts } from '../observability/stalled-parts.js';
import type { ConditionSync } from '../observability/kube-reporter.js';
import { statusDocument } from './status-doc.js';
import { RpcServer } from '../rpc/server.js';
import { IpamService } from '../service/ipam-service.js';
import { podRouteTable } from '../../netfacts/routing.js';
import { stageTrace } from '../service/stage-trace.js';
import { installCniAndReport } from '../startup/cni-install-report.js';
import { readVpcCidrs } from '../startup/discover.js';
import { startEniConfig } from '../startup/eniconfig-wiring.js';
import { startHostNetworkSync } from '../controller/host-network-sync.js';
import { startHttpEndpoints } from '../observability/http-endpoints.js';
import { buildPool } from '../startup/pool-wiring.js';
import type { DaemonParts } from './daemon-registry.js';
import type { PartEnv } from './parts-restore.js';
import { onceOnly, partOf } from './runner.js';

const part = partOf<DaemonParts>();

/** Custom networking: the node's ENIConfig, watched; where new ENIs go, or why none may be created. */
export const eniConfigPart = ({ config, log }: PartEnv) =>
  part({
    name: 'eniconfig',
    needs: [],
    start() {
      const started = startEniConfig(config, log);
      let stopped = false;
      // Stopped by eniconfig-follow first when it ran; once either way.
      const stop = () => {
        if (!stopped) started.stop();
        stopped = true;
      };
      const eniConfig = { ...started, stop };
      return { value: eniConfig, stop };
    },
  });

/** Host networking (rules, SNAT, sysctls) of the node and its ENIs; stop also closes IMDS, which its VPC CIDR recheck was the last to use. */
export const hostNetworkPart = ({ config, log }: PartEnv) =>
  part({
    name: 'host-network',
    needs: ['datastore', 'node'],
    async start({ datastore: { ds }, node: { inv } }) {
      const hostNet = config.hostNetworking
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
      return {
        value: hostNet,
        stop: () => {
          hostNet?.stop();
          inv.imds.close();
        },
      };
    },
  });

/** The pool controller and the ENI manager (not started: the pool-loop part starts them). */
export const poolPart = ({ config, log }: PartEnv) =>
  part({
    name: 'pool',
    // Host networking of a new ENI is set up before its IPs can be handed out.
    // Its EC2 port is the inventory cache's (cache-guarded-ec2.ts): the cache is kept in step around EC2's assigns and releases.
    needs: [
      'node',
      'datastore',
      'release-gate',
      'metrics',
      'eniconfig',
      'host-network',
      'inventory-cache',
      'node-schedule',
    ],
    start({ node: { inv, unit }, datastore: { ds, adoption }, 'release-gate': gate, metrics, eniconfig, ...got }) {
      const hostNet = got['host-network'];
      const wiring = buildPool({
        config,
        inv,
        ec2: got['inventory-cache'].ec2,
        ds,
        gate,
        log,
        metrics: metrics.metrics,
        unit,
        adoption,
        eniConfig: eniconfig.current,
        eniCreationRefused: eniconfig.block,
        managementPaused: got['node-schedule'].paused,
        ...(hostNet ? { setupEni: (eni) => hostNet.setupEni(eni) } : {}),
      });
      got['node-schedule'].onChange(() => wiring.pool.trigger());
      return { value: wiring };
    },
  });

/** The request path (ADD/DEL/CHECK/GC/STATUS). */
export const servicePart = ({ config, log }: PartEnv) =>
  part({
    name: 'service',
    needs: ['datastore', 'pool', 'checkpoint', 'metrics', 'kernel', 'phase'],
    start({
      datastore: { ds },
      pool: { pool },
      checkpoint: { writer },
      metrics: { metrics, throttle },
      kernel,
      phase,
    }) {
      const service = new IpamService({
        ds,
        pool,
        persist: () => writer.commit(),
        log,
        addWaitTimeoutMs: config.addWaitTimeoutMs,
        addWaitGrowingMs: config.addWaitForEniMs,
        ec2Throttled: () => throttle.throttledWithin(config.addWaitTimeoutMs + 1000),
        stopping: () => phase.stopping,
        onConflict: () => metrics.ipConflict(),
        onDel: metrics.delRequested,
        kernel,
        onAddFailed: (reason, noIp, d) => {
          metrics.addFailed(reason, noIp);
          if (noIp) phase.reporter()?.podAddFailed({ reason, message: d.message, ...(d.pod ? { pod: d.pod } : {}) });
        },
      });
      return { value: service };
    },
  });

/** The periodic check of quarantined addresses against the kernel's routes. */
export const quarantineCheckPart = ({ config, log }: PartEnv) =>
  part({
    name: 'quarantine-check',
    needs: ['datastore'],
    start({ datastore: { ds } }) {
      const q = startQuarantineCheck({
        ds,
        log,
        intervalMs: config.gcIntervalMs,
        read: kernelRoutedReader(config.cniExecNetns),
      });
      return { value: undefined, stop: () => q.stop() };
    },
  });

/** The gauges' sources (read at scrape time). */
export const metricsSourcesPart = ({ config }: PartEnv) =>
  part({
    name: 'metrics-sources',
    needs: [
      'metrics',
      'datastore',
      'release-gate',
      'pool',
      'host-network',
      'evidence',
      'node',
      'ipv6',
      'phase',
      'cooldown-evidence',
    ],
    start({
      metrics: { metrics },
      datastore: { ds },
      'release-gate': gate,
      pool,
      evidence,
      node,
      ipv6,
      phase,
      ...got
    }) {
      const { maxEni } = pool;
      const hostNet = got['host-network'];
      metrics.setSources({
        ds,
        gate,
        pool: pool.pool,
        quarantined: () => ds.quarantined().length,
        sysctls: () => hostNet?.sysctls() ?? [],
        connmark: () => hostNet?.connmarkReconciles(),
        limits: () => ({
          maxEni,
          // Custom networking: the primary ENI serves no pod.
          ipMax:
            (maxEni - (config.customNetworkCfg ? 1 : 0)) *
            (node.inv.limits.ipv4PerEni - 1) *
            (node.unit === 'prefix' ? 16 : 1),
        }),
        evidence: evidence.evidence.sourceStates,
        nodeCondition: () => phase.reporting?.reporter()?.conditionSync(),
        cooldownEvidence: () => got['cooldown-evidence'].state(),
        ...(ipv6
          ? {
              ipv6: () => ({
                mode: config.ipFamily === 'dual' ? ('dual' as const) : ('ipv6' as const),
                prefixes: 1,
                assigned: ipv6.v6.allocations().length,
                quarantined: ipv6.v6.quarantined().length,
              }),
            }
          : {}),
      });
      return { value: undefined };
    },
  });

/** `/v1/status`, and the parts that back off and say so there (log, metrics), never spin. */
export const statusPart = ({ log }: PartEnv) =>
  part({
    name: 'status',
    needs: [
      'metrics',
      'node',
      'datastore',
      'release-gate',
      'pool',
      'eniconfig',
      'evidence',
      'host-network',
      'phase',
      'ipv6',
    ],
    start({ metrics: { metrics }, node: { inv }, datastore: { ds }, 'release-gate': gate, pool, phase, ...got }) {
      const stalled = new StalledParts({ log, registry: metrics.registry });
      const { targets, limits, exhaustedSubnets } = pool;
      const hostNet = got['host-network'];
      const status = () => ({
        ...statusDocument(
          {
            inv,
            ds,
            gate,
            wiring: { targets, limits, pool: pool.pool, exhaustedSubnets },
            eniConfig: got.eniconfig,
            evidence: got.evidence.evidence,
            lifecycle: () => phase.lifecycle,
            sysctls: () => hostNet?.sysctls(),
            ...(got.ipv6 ? { ipv6: (now: number) => got.ipv6!.v6.state(now) } : {}),
          },
          monoNow(),
        ),
        nodeCondition: conditionStatus(phase.reporting?.reporter()?.conditionSync()),
        stalled: stalled.list(),
      });
      return { value: { status, stalled } };
    },
  });

/** The introspection and metrics servers, started and closed together. */
export const httpEndpointsPart = ({ config }: PartEnv) =>
  part({
    name: 'http-endpoints',
    needs: ['status', 'datastore', 'eniconfig', 'metrics', 'ipv6'],
    async start({ status: { status }, datastore: { ds }, eniconfig, metrics: { metrics }, ipv6 }) {
      const endpoints = await startHttpEndpoints(
        config,
        {
          status,
          allocations: () => familyAllocations(ds.allocations(), ipv6?.v6.allocations()),
          enis: () => enisDocument(ds, podRouteTable, monoNow(), ipv6 && ipv6CidrsDocument(ipv6.v6.state(monoNow()))),
          eniConfig: () => eniconfig.name(),
          stageTrace: () => stageTrace.summary(),
          ipamdEnv: () => ipamdEnvSettings(config),
          networkEnv: () => networkEnvSettings(config),
        },
        metrics,
      );
      return { value: endpoints, stop: () => endpoints.close() };
    },
  });

/**
 * The gRPC server, listening: ipamd serves. Not before the checkpoint is restored, the
 * spooled DELs applied and the evidence started (its first pass done unless this boot's
 * checkpoint serves at once), nor before host networking is set up.
 */
export const rpcPart = ({ config, log }: PartEnv) =>
  part({
    name: 'rpc',
    needs: ['service', 'node', 'metrics', 'checkpoint', 'del-spool', 'evidence', 'host-network', 'family', 'egress-v4'],
    async start({ service, node: { inv }, metrics: { metrics }, family }) {
      const rpc = new RpcServer({
        ...(family ? { family } : {}),
        socketPath: config.socketPath,
        service,
        log,
        vpcCidrs: () => inv.vpcCidrs,
        externalSnat: config.externalSnat,
        observe: metrics.observeRpc,
      });
      const shutdown = onceOnly((graceMs: number) => rpc.shutdown(graceMs));
      await rpc.listen();
      return { value: { rpc, shutdown }, stop: ({ graceMs }) => shutdown(graceMs) };
    },
  });

/** The plugin log files the CNI exec server appends to, rotated. */
export const pluginLogsPart = ({ config }: PartEnv) =>
  part({
    name: 'plugin-logs',
    needs: ['status'],
    start({ status: { stalled } }) {
      const logs = new PluginLogFiles({ maxSize: config.logFileMaxSize, maxFiles: config.logFileMaxFiles, stalled });
      return { value: logs, stop: () => logs.close() };
    },
  });

/** The shim's fast path: plugin invocations run in-process (ENI_IPAM_CNI_EXEC), listening before the conflist exists. */
export const cniExecPart = ({ config, log }: PartEnv) =>
  part({
    name: 'cni-exec',
    needs: ['rpc', 'plugin-logs'],
    async start({ rpc: { rpc }, 'plugin-logs': pluginLogs }) {
      const server = config.cniExec
        ? new CniExecServer({
            socketPath: config.cniExecSocket,
            log,
            ...(config.cniExecNetns ? { nodeNetns: config.cniExecNetns } : {}),
            ipamd: { socketPath: config.socketPath, client: rpc.directClient() },
            appendLog: (file, line) => pluginLogs.append(file, line),
          })
        : undefined;
      const close = onceOnly(async (graceMs: number) => server?.close(graceMs));
      await server?.listen();
      return { value: { server, close }, stop: ({ graceMs }) => close(graceMs) };
    },
  });

/** The spool's watch: entries spooled since the start-up pass (the exec socket was not there yet), and from now on. */
export const spoolWatchPart = () =>
  part({
    name: 'spool-watch',
    needs: ['del-spool', 'cni-exec', 'pool'],
    async start({ 'del-spool': spool, pool: { pool } }) {
      await spool.start(() => pool.trigger());
      return { value: undefined, stop: () => spool.stop() };
    },
  });

/** The CNI binary and conflist, installed once ipamd can answer (ENI_IPAM_INSTALL_CNI). */
export const cniInstallPart = ({ config, log }: PartEnv) =>
  part({
    name: 'cni-install',
    needs: ['rpc', 'cni-exec'],
    async start({ 'cni-exec': cniExec }) {
      if (config.installCni) await installCniAndReport(config, !!cniExec.server, log);
      return { value: undefined };
    },
  });

/**
 * `/v1/status` `nodeCondition`: whether the condition on the Node is current, when ipamd last
 * wrote it (ISO 8601) and why it cannot now; null while Kubernetes reporting is off.
 */
function conditionStatus(c: ConditionSync | undefined) {
  if (!c) return null;
  return {
    synced: c.synced,
    writtenAt: c.writtenAt !== undefined ? new Date(c.writtenAt).toISOString() : null,
    ...(c.error ? { error: c.error } : {}),
  };
}
