/**
 * ipamd standing by before it manages the node: while a live aws-node runs there
 * (aws-node-wait.ts) or another DaemonSet owns the node (node-owner.ts). It says so in
 * its log, in a Warning Event on the Node (reason `reason`, one per new situation) and,
 * for aws-node, in its node condition `eni-ipam.io/IPAllocatable=False`; and it answers
 * the liveness probe on its gRPC socket (`eniipam.v1.Liveness` SERVING, the readiness
 * service "" NOT_SERVING) so the kubelet neither restarts it nor counts it ready. Every
 * write is best effort: a standby never ends because the API cannot be reached.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import net from 'node:net';
import path from 'node:path';
import { mkdirParents } from '../../nodefs/dirs.js';
import type { IpamdConfig } from '../config.js';
import { loadKubeConfig } from '../kube/config.js';
import type { Logger } from '../log.js';
import { CONDITION_TYPE } from '../observability/node-ip-state.js';
import { isoSeconds, KubeWrites } from '../observability/kube-writes.js';
import { notServingYet } from '../rpc/health-names.js';
import { removeStaleSocket } from '../rpc/unix-listener.js';

/** A standby's outward signs; {@link Standby.close} ends them (idempotent). */
export interface Standby {
  /** Records a new situation: a Warning Event (and the condition, with `condition`) and one log line. */
  report(s: { reason: string; message: string; condition: boolean }): Promise<void>;
  close(): Promise<void>;
}

/** Binds the liveness-only health server on `socket`; undefined (logged) when another process serves there. */
async function standbyHealth(socket: string, log: Logger): Promise<(() => Promise<void>) | undefined> {
  try {
    await mkdirParents(path.dirname(socket), 0o750);
    await removeStaleSocket(socket);
  } catch (e) {
    log.warn({ socket, err: (e as Error).message }, 'standby: not answering probes on the gRPC socket');
    return undefined;
  }
  const health = new HealthImplementation(notServingYet());
  const server = new grpc.Server();
  health.addToServer(server);
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const listener = net.createServer((conn) => injector.injectConnection(conn));
  const ok = await new Promise<boolean>((resolve) => {
    listener.once('error', () => resolve(false));
    listener.listen(socket, () => resolve(true));
  });
  if (!ok) return undefined;
  listener.on('error', () => undefined);
  return async () => {
    listener.close();
    server.forceShutdown();
    await removeStaleSocket(socket).catch(() => undefined);
  };
}

/**
 * Starts a standby for `config` (its socket; MY_NODE_NAME and the Kubernetes configuration
 * for the Event and condition, when present). `health: false`: no probe answers on the
 * socket (a DaemonSet standing aside before its guards may share the socket path with the
 * ipamd that runs the node, whose restart must find the path free).
 */
export async function startStandby(
  config: Pick<IpamdConfig, 'socketPath' | 'nodeName'>,
  log: Logger,
  o: { health?: boolean } = {},
): Promise<Standby> {
  const closeHealth = o.health === false ? undefined : await standbyHealth(config.socketPath, log);
  let writes: KubeWrites | undefined;
  if (config.nodeName)
    try {
      writes = new KubeWrites(loadKubeConfig().kc, config.nodeName);
    } catch {
      // no Kubernetes configuration: the log says it all
    }
  const node = config.nodeName;
  let closed: Promise<void> | undefined;
  return {
    async report(s) {
      log.warn({ reason: s.reason }, s.message);
      if (!writes || !node) return;
      const now = Date.now();
      await writes
        .writeEvent({
          key: s.reason,
          op: 'create',
          occurrence: {
            involved: { kind: 'Node', name: node },
            namespace: 'default',
            type: 'Warning',
            reason: s.reason,
            message: s.message.slice(0, 1024),
          },
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
        })
        .catch((e: Error) => log.warn({ err: e.message }, 'standby: the Event could not be written'));
      if (s.condition)
        await writes
          .patchCondition({
            type: CONDITION_TYPE,
            status: 'False',
            reason: s.reason,
            message: s.message.slice(0, 1024),
            lastHeartbeatTime: isoSeconds(now),
            lastTransitionTime: isoSeconds(now),
          })
          .catch((e: Error) => log.warn({ err: e.message }, 'standby: the node condition could not be written'));
    },
    close: () => (closed ??= closeHealth ? closeHealth() : Promise.resolve()),
  };
}
