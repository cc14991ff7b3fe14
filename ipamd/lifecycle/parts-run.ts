/**
 * ipamd's last parts: the pool loop and the ENI lifecycle, the drain, Kubernetes
 * reporting, and "ipamd serving". Their reverse order is the stop's first half: stopping
 * is announced, reporting stops (a stopping pool must not read as "cannot serve"), the
 * exec socket and the gRPC server drain while the pool still runs (an ADD waiting on a
 * refill is served), then the pool stops and the EC2 client closes.
 */
import { monoNow } from '../clock.js';
import { confirmJitterMs } from '../startup/fast-start.js';
import { startEniLifecycle } from '../controller/eni-lifecycle/start.js';
import { startKubeReportingWhenServing } from '../startup/kube-reporting-start.js';
import { startNodeSchedule } from '../startup/node-schedule-wiring.js';
import { startCooldownEvidence } from '../startup/cooldown-evidence-wiring.js';
import type { DaemonParts } from './daemon-registry.js';
import type { PartEnv } from './parts-restore.js';
import { partOf } from './runner.js';

const part = partOf<DaemonParts>();

/**
 * How long a stop lets ADDs waiting on a refill and EC2 calls in flight finish before it
 * fails and aborts them (ms); well within the shutdown deadline (shutdown.ts).
 */
export const EC2_STOP_GRACE_MS = 3000;

/**
 * The stop's EC2 grace: armed when the stop begins (by the serving part), it cuts what
 * still waits on EC2 after {@link EC2_STOP_GRACE_MS}: ADDs waiting on a refill fail (they
 * would hold the drain), EC2 calls in flight are aborted (reconciled at the next start, as
 * after a crash). Its stop, right after the pool's, disarms it and closes the EC2 client.
 */
export const stopGracePart = () =>
  part({
    name: 'stop-grace',
    needs: ['node', 'pool'],
    start({ node: { inv }, pool: { pool } }) {
      let cut: NodeJS.Timeout | undefined;
      const arm = () => {
        cut ??= setTimeout(() => {
          pool.refuseWaiting();
          inv.ec2.close();
        }, EC2_STOP_GRACE_MS);
      };
      return {
        value: { arm },
        stop: () => {
          clearTimeout(cut);
          inv.ec2.close();
        },
      };
    },
  });

/** The pool loop and the ENI lifecycle (off with DISABLE_NETWORK_RESOURCE_PROVISIONING); stop ends both. */
export const poolLoopPart = ({ config, log }: PartEnv) =>
  part({
    name: 'pool-loop',
    // No release before the evidence is read; the checkpoint flushes after the pool stops.
    needs: [
      'pool',
      'node',
      'datastore',
      'release-gate',
      'metrics',
      'inventory-cache',
      'phase',
      'stop-grace',
      'evidence',
      'checkpoint',
    ],
    start({
      pool: { pool, enis, leftoversSettled },
      node: { inv },
      datastore: { ds },
      'release-gate': gate,
      metrics,
      phase,
      ...got
    }) {
      if (config.ipFamily === 'ipv6')
        log.info('IPv6 mode: no warm pool and no secondary ENIs; pods are served from the /80');
      else if (config.disableNetworkResourceProvisioning)
        log.warn(
          'DISABLE_NETWORK_RESOURCE_PROVISIONING=true: the warm pool is not managed; serving only what the ENIs already hold',
        );
      else {
        pool.start();
        phase.lifecycle = startEniLifecycle({
          config,
          inv,
          ec2: got['inventory-cache'].ec2,
          ds,
          gate,
          enis,
          pool,
          log,
          metrics: metrics.metrics,
          onLeftoversSettled: leftoversSettled,
          ...(inv.source === 'cache'
            ? {
                firstPassDelayMs: confirmJitterMs(config.restartConfirmJitterMs),
                onFirstOkPass: got['inventory-cache'].confirmed,
              }
            : {}),
        });
      }
      return {
        value: undefined,
        stop: async () => {
          await phase.lifecycle?.stop();
          await pool.stop();
        },
      };
    },
  });

/**
 * Nothing to start. Its stop drains what serves requests before the pool stops: the CNI
 * exec socket first (its invocations call the RPCs), the DEL spool's watch, then the gRPC
 * server (in-flight RPCs finish within the grace).
 */
export const drainPart = () =>
  part({
    name: 'drain',
    needs: ['cni-exec', 'spool-watch', 'del-spool', 'rpc', 'pool-loop'],
    start({ 'cni-exec': cniExec, 'del-spool': spool, rpc }) {
      return {
        value: undefined,
        stop: async ({ graceMs }) => {
          await cniExec.close(graceMs);
          await spool.stop();
          await rpc.shutdown(graceMs);
        },
      };
    },
  });

/** AWS_MANAGE_ENIS_NON_SCHEDULABLE: this node watched once ipamd serves (startup/node-schedule-wiring.ts). */
export const nodeSchedulePart = ({ config, log }: PartEnv) =>
  part({
    name: 'node-schedule',
    needs: ['phase'],
    start({ phase }) {
      const pause = startNodeSchedule(config, log, phase.serving);
      return { value: pause, stop: () => pause.stop() };
    },
  });

/**
 * ENI_IPAM_COOLDOWN_EVIDENCE: the EndpointSlice watch that may end a cooldown early
 * (startup/cooldown-evidence-wiring.ts), watched once ipamd serves; until it has synced,
 * and whenever it cannot be read, the timer alone rules. Stop ends the watch.
 */
export const cooldownEvidencePart = ({ config, log }: PartEnv) =>
  part({
    name: 'cooldown-evidence',
    needs: ['phase', 'datastore'],
    start({ phase, datastore: { ds } }) {
      // Without MY_NODE_NAME ipamd uses no Kubernetes API (the pod source is off too).
      const on = config.nodeName ? config : { ...config, cooldownEvidence: false };
      const handle = startCooldownEvidence(on, ds, log, monoNow, phase.serving);
      return { value: handle, stop: () => handle.stop() };
    },
  });

/** Events, the node condition, the taint: started once ipamd serves (startup/kube-reporting-start.ts). */
export const kubeReportingPart = ({ config, log }: PartEnv) =>
  part({
    name: 'kube-reporting',
    // Stops before the drain: a stopping pool must not read as "cannot serve" (a taint).
    needs: ['phase', 'datastore', 'release-gate', 'pool', 'service', 'eniconfig', 'drain'],
    start({ phase, datastore: { ds }, 'release-gate': gate, pool: { pool }, service, eniconfig }) {
      const reporting = startKubeReportingWhenServing(
        phase.serving,
        {
          config,
          log,
          ds,
          gate,
          pool,
          // IPv6 mode serves from the /80, not the (empty, unmanaged) IPv4 pool: never "cannot serve" for it.
          status: () =>
            config.ipFamily === 'ipv6'
              ? { canServe: true, code: 0, message: 'serving IPv6 from the /80' }
              : service.status(),
          eniConfigBlocked: eniconfig.block,
        },
        () => phase.stopping,
        log,
      );
      phase.reporting = reporting;
      return {
        value: reporting,
        stop: async () => {
          phase.stopping = true;
          if (phase.isServing) await reporting.ready; // never serving: it never starts
          await reporting.reporter()?.stop();
        },
      };
    },
  });

/** A change of the node's ENIConfig wakes the pool and the reporter; stop ends the ENIConfig watch. */
export const eniConfigFollowPart = () =>
  part({
    name: 'eniconfig-follow',
    needs: ['eniconfig', 'pool', 'phase', 'kube-reporting'],
    start({ eniconfig, pool: { pool }, phase }) {
      eniconfig.onChange(() => {
        pool.trigger();
        phase.reporter()?.kick();
      });
      return { value: undefined, stop: () => eniconfig.stop() };
    },
  });

/** ipamd serves: start-up metrics, the "ipamd serving" line. Stop: stopping is announced and the EC2 grace armed. */
export const servingPart = ({ config, log, t0 }: PartEnv) =>
  part({
    name: 'serving',
    // Last: "ipamd serving" means every part runs (tests and probes wait for it); its stop announces stopping first.
    needs: [
      'aws-node-import',
      'quarantine-check',
      'metrics-sources',
      'spool-watch',
      'cni-install',
      'pool-loop',
      'phase',
      'metrics',
      'evidence',
      'status',
      'http-endpoints',
      'rpc',
      'cni-exec',
      'stop-grace',
      'drain',
      'kube-reporting',
      'eniconfig-follow',
      'npa-config',
    ],
    start({ phase, metrics: { metrics }, evidence, status: { status }, ...got }) {
      const endpoints = got['http-endpoints'];
      metrics.started({
        startupSeconds: (monoNow() - performance.timeOrigin) / 1000,
        nodeInitSeconds: evidence.nodeInitMs / 1000,
        withApiServer: !!evidence.evidence.kubeConfigured,
      });
      log.info(
        {
          socket: config.socketPath,
          cniExecSocket: got['cni-exec'].server ? config.cniExecSocket : null,
          introspectionPort: endpoints.introspectionPort,
          metricsPort: endpoints.metricsPort,
          startupMs: monoNow() - t0,
          ...status().counts,
        },
        'ipamd serving',
      );
      phase.served();
      return {
        value: undefined,
        stop: () => {
          phase.stopping = true;
          got['stop-grace'].arm();
        },
      };
    },
  });
