/**
 * Is aws-node (amazon-vpc-cni-k8s) alive on this node? Two IPAMs on one node hand out the
 * same addresses, so ipamd looks before it manages the node (docs/design.md#never-beside-a-live-aws-node).
 * Each sign is a fact of amazon-vpc-cni-k8s's sources (`pkg/ipamd/rpc_handler.go`,
 * `introspect.go`, `cmd/aws-k8s-agent/main.go`, `pkg/ipamd/datastore/data_store.go`):
 *
 * - its ipamd's gRPC, on the Unix socket `/var/run/aws-node/ipamd.sock` (1.23 and later,
 *   the socket its CNI plugin calls) or on `127.0.0.1:50051` (earlier): it answers
 *   `grpc.health.v1.Health/Check` for the service `grpc.health.v1.aws-node`, a name only
 *   aws-node registers (any status counts: it knows the name). On its own socket a listener
 *   that does not answer within the timeout counts too (a hung aws-node);
 * - its metrics on port 61678 (`/metrics` with `awscni_` series and none of eni-ipam's
 *   `eni_ipam_`, since eni-ipam serves the same port and `awscni_` names);
 * - its introspection on `127.0.0.1:61679` (`/v1/enis` answers, `/v1/status`, which only
 *   eni-ipam serves, does not);
 * - its checkpoint (`/var/run/aws-node/ipam.json`), which it rewrites at every pod ADD and
 *   DEL: written less than the quiet period ago, or changed since the previous look.
 *
 * A stale checkpoint (aws-node gone) is no sign: it is imported as usual afterwards
 * (startup/aws-node-import.ts). A listener on 50051, 61678 or 61679 that is not aws-node
 * (another eni-ipam, anything else) is no sign.
 */
import { stat } from 'node:fs/promises';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { httpRequest } from '../cloud/imds-http.js';

/** The health service name only aws-node's ipamd registers (rpc_handler.go `grpcHealthServiceName`). */
export const AWS_NODE_HEALTH_SERVICE = 'grpc.health.v1.aws-node';

/** One sign of a live aws-node: which source, where, and what was seen (one line). */
export interface AwsNodeSign {
  source: 'grpc-socket' | 'grpc-port' | 'metrics' | 'introspection' | 'checkpoint';
  where: string;
  saw: string;
}

/** Where to look; ports and host default to aws-node's. */
export interface AwsNodeLookOptions {
  /** ENI_IPAM_AWS_NODE_SOCKET. */
  socket: string;
  /** ENI_IPAM_AWS_NODE_CHECKPOINT_PATH. */
  checkpoint: string;
  /** ENI_IPAM_AWS_NODE_QUIET (ms). */
  quietMs: number;
  host?: string;
  grpcPort?: number;
  metricsPort?: number;
  introspectionPort?: number;
  /** Deadline of each probe (ms, default 2000). */
  timeoutMs?: number;
  /** Wall clock (ms since the epoch), for the checkpoint's age. */
  now?: () => number;
}

/** The checkpoint as last seen (mtime, size, inode), to tell a write between two looks. */
export type CheckpointStamp = string | undefined;

/**
 * Asks `target` (a gRPC target: `unix:///path` or `host:port`) for aws-node's health service.
 * @returns 'aws-node' when it knows the service, 'silent' when nothing answered in time,
 *   'none' when nothing listens, 'other' when something else answered.
 */
export async function askAwsNodeHealth(
  target: string,
  timeoutMs: number,
): Promise<'aws-node' | 'silent' | 'none' | 'other'> {
  const Client = grpc.makeGenericClientConstructor(healthService, 'Health');
  const client = new Client(target, grpc.credentials.createInsecure());
  try {
    await new Promise((resolve, reject) =>
      client.Check(
        { service: AWS_NODE_HEALTH_SERVICE },
        { deadline: Date.now() + timeoutMs },
        (err: unknown, r: unknown) => (err ? reject(err as grpc.ServiceError) : resolve(r)),
      ),
    );
    return 'aws-node';
  } catch (e) {
    const code = (e as grpc.ServiceError).code;
    if (code === grpc.status.DEADLINE_EXCEEDED) return 'silent';
    if (code === grpc.status.UNAVAILABLE) return 'none';
    return 'other';
  } finally {
    client.close();
  }
}

/** GET `url` within `timeoutMs`; undefined when nothing answered. */
async function get(url: string, timeoutMs: number): Promise<{ status: number; body: string } | undefined> {
  try {
    return await httpRequest(url, { timeoutMs });
  } catch {
    return undefined;
  }
}

async function grpcSigns(o: AwsNodeLookOptions, host: string, timeoutMs: number): Promise<AwsNodeSign[]> {
  const out: AwsNodeSign[] = [];
  const bySocket = await askAwsNodeHealth(`unix://${o.socket}`, timeoutMs);
  if (bySocket === 'aws-node' || bySocket === 'silent')
    out.push({
      source: 'grpc-socket',
      where: o.socket,
      saw:
        bySocket === 'aws-node'
          ? `aws-node's ipamd answers gRPC health (${AWS_NODE_HEALTH_SERVICE}) on ${o.socket}`
          : `a process listens on aws-node's ipamd socket ${o.socket} and did not answer within ${timeoutMs} ms`,
    });
  const port = `${host}:${o.grpcPort ?? 50051}`;
  if ((await askAwsNodeHealth(port, timeoutMs)) === 'aws-node')
    out.push({
      source: 'grpc-port',
      where: port,
      saw: `aws-node's ipamd answers gRPC health (${AWS_NODE_HEALTH_SERVICE}) on ${port}`,
    });
  return out;
}

async function httpSigns(o: AwsNodeLookOptions, host: string, timeoutMs: number): Promise<AwsNodeSign[]> {
  const out: AwsNodeSign[] = [];
  const metrics = `http://${host}:${o.metricsPort ?? 61678}/metrics`;
  const m = await get(metrics, timeoutMs);
  if (m?.status === 200 && /^awscni_/m.test(m.body) && !/^eni_ipam_/m.test(m.body))
    out.push({
      source: 'metrics',
      where: metrics,
      saw: `aws-node's metrics (awscni_*, no eni_ipam_*) answer on ${metrics}`,
    });
  const base = `http://${host}:${o.introspectionPort ?? 61679}`;
  const enis = await get(`${base}/v1/enis`, timeoutMs);
  if (enis?.status === 200 && (await get(`${base}/v1/status`, timeoutMs))?.status !== 200)
    out.push({
      source: 'introspection',
      where: `${base}/v1/enis`,
      saw: `aws-node's introspection answers on ${base}/v1/enis (and not eni-ipam's /v1/status)`,
    });
  return out;
}

/** The checkpoint's sign, if written within the quiet period or since `prev`; and its stamp now. */
async function checkpointSign(
  o: AwsNodeLookOptions,
  prev: CheckpointStamp,
): Promise<{ sign?: AwsNodeSign; stamp: CheckpointStamp }> {
  const st = await stat(o.checkpoint).catch(() => undefined);
  if (!st) return { stamp: undefined };
  const stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
  const age = (o.now ?? Date.now)() - st.mtimeMs;
  const changed = prev !== undefined && prev !== stamp;
  // A future mtime within the quiet period counts as just written; further ahead, a clock step: only a change counts.
  if (changed || Math.abs(age) < o.quietMs) {
    const when = changed ? 'since the last look' : `${Math.round(Math.max(age, 0) / 1000)} s ago`;
    return {
      stamp,
      sign: {
        source: 'checkpoint',
        where: o.checkpoint,
        saw: `aws-node's checkpoint ${o.checkpoint} was written ${when} (quiet period ${Math.round(o.quietMs / 1000)} s)`,
      },
    };
  }
  return { stamp };
}

/**
 * Looks once at every source (together; each bounded by `timeoutMs`). `prev` is the
 * checkpoint's stamp from the previous look (a write since then is a sign).
 * Never throws: an unreadable source is no sign.
 */
export async function lookForAwsNode(
  o: AwsNodeLookOptions,
  prev?: CheckpointStamp,
): Promise<{ signs: AwsNodeSign[]; stamp: CheckpointStamp }> {
  const host = o.host ?? '127.0.0.1';
  const timeoutMs = o.timeoutMs ?? 2000;
  const [g, h, c] = await Promise.all([
    grpcSigns(o, host, timeoutMs),
    httpSigns(o, host, timeoutMs),
    checkpointSign(o, prev),
  ]);
  return { signs: [...g, ...h, ...(c.sign ? [c.sign] : [])], stamp: c.stamp };
}
