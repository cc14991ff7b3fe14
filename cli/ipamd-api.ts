/**
 * What the CLI reads from a running ipamd: introspection JSON over HTTP (`/v1/status`,
 * `/v1/allocations`, default 127.0.0.1:61679), metrics text, and the gRPC health
 * service on its Unix socket. Every failure becomes one {@link CliError} line naming
 * the address and what to check; never a stack trace.
 */
import { stat } from 'node:fs/promises';
import type { PoolCounts, PoolEniView, PoolTargets } from '../ipamd/pool/index.js';
import { CliError, EXIT, systemError } from './errors.js';
import type { GlobalOptions } from './options.js';

/** One allocation as `/v1/allocations` serves it (the checkpoint's shape). */
export interface Allocation {
  networkName: string;
  containerID: string;
  ifName: string;
  ipv4: string;
  eniId: string;
  allocatedAt: number | string;
  pod?: { namespace: string; name: string; uid: string };
}

/** The parts of `/v1/status` the CLI reads (ipamd/daemon.ts builds it). */
export interface IpamdStatus {
  instanceId: string;
  instanceType: string;
  counts: {
    total: number;
    assigned: number;
    available: number;
    cooling: number;
    enis?: number;
    unverified?: number;
    [k: string]: unknown;
  };
  pool: PoolCounts;
  targets: PoolTargets;
  enis: PoolEniView[];
  releasesFrozen: boolean;
  freezeReasons: string[];
  waitingAdds: number;
  lastPoolError: string | null;
  vpcCidrs: string[];
  /** Present on ipamd builds that serve it: the instance limits the pool works with. */
  limits?: { instanceType: string; instanceMaxEnis: number; ipv4PerEni: number; maxEniSetting?: number };
  quarantinedIps?: Array<{ ip: string; [k: string]: unknown }>;
  /** Present on ipamd builds with custom networking: the node's ENIConfig selection (`state` off, ok, missing, invalid, unknown). */
  eniConfig?: {
    state: string;
    name?: string;
    selectedBy?: string;
    subnetIds?: string[];
    securityGroupIds?: string[];
    reason?: string;
  };
  evidence?: {
    criEndpoint?: string;
    kubernetes?: boolean;
    kernel?: string;
    passes?: number;
    sources?: Record<string, string> | null;
    lastPassAt?: number | null;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

/**
 * GETs `path` from `base` with a deadline of `timeoutMs` and returns the body text.
 * @throws CliError: unreachable (3) when refused, timed out or answering non-2xx.
 */
export async function httpGet(
  base: string,
  path: string,
  timeoutMs: number,
  what = 'ipamd introspection',
): Promise<string> {
  const url = `${base}${path}`;
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const err = e as Error & { cause?: NodeJS.ErrnoException };
    const why =
      err.name === 'TimeoutError'
        ? `no answer within ${timeoutMs} ms`
        : err.cause?.code === 'ECONNREFUSED'
          ? 'connection refused'
          : (err.cause?.message ?? err.message);
    throw new CliError(
      `cannot reach ${what} at ${base} (${why}): is ipamd running, and is this its network namespace? (set ${what.includes('metrics') ? '--metrics or METRICS_BIND_ADDRESS' : '--introspection or INTROSPECTION_BIND_ADDRESS'})`,
      EXIT.unreachable,
    );
  }
  const body = await res.text();
  if (!res.ok) throw new CliError(`${what} at ${url} answered HTTP ${res.status}`, EXIT.unreachable);
  return body;
}

/** GETs and parses JSON. @throws CliError as {@link httpGet}, or unreachable (3) for a body that is not JSON. */
export async function getJson<T>(o: GlobalOptions, path: string): Promise<T> {
  const body = await httpGet(o.introspection, path, o.timeoutMs);
  try {
    return JSON.parse(body) as T;
  } catch {
    throw new CliError(
      `ipamd introspection at ${o.introspection}${path} answered something that is not JSON`,
      EXIT.unreachable,
    );
  }
}

/** `/v1/status`. */
export const fetchStatus = (o: GlobalOptions): Promise<IpamdStatus> => getJson<IpamdStatus>(o, '/v1/status');
/**
 * The IPv4 allocations of `/v1/allocations` (what the CLI's views, audit and pod rows
 * compare with EC2, the checkpoint and the kernel). An IPv6-mode attachment is listed there
 * with `ipv6` and no `ipv4`, and left out here.
 */
export const fetchAllocations = async (o: GlobalOptions): Promise<Allocation[]> =>
  (await getJson<Array<Allocation | { ipv4?: undefined }>>(o, '/v1/allocations')).filter(
    (a): a is Allocation => typeof a.ipv4 === 'string',
  );

/**
 * Asks `grpc.health.v1.Health/Check` on ipamd's socket.
 * @returns `SERVING` (or the status ipamd answered, e.g. `NOT_SERVING`).
 * @throws CliError: unreachable (3) when the socket is missing or not a live ipamd;
 *         permission (4) when the CLI may not open it.
 */
export async function socketHealth(o: GlobalOptions): Promise<string> {
  try {
    const st = await stat(o.socket);
    if (!st.isSocket())
      throw new CliError(
        `--socket ${o.socket} is not a Unix socket (set --socket or ENI_IPAM_SOCKET to ipamd's gRPC socket)`,
        EXIT.unreachable,
      );
  } catch (e) {
    if (e instanceof CliError) throw e;
    const err = systemError(e, `ipamd's socket ${o.socket}`, EXIT.unreachable);
    if (err.code === EXIT.unreachable)
      throw new CliError(
        `ipamd's socket ${o.socket} does not exist: is ipamd running? (set --socket or ENI_IPAM_SOCKET)`,
        EXIT.unreachable,
      );
    throw err;
  }
  const { probeHealth } = await import('../ipamd/health-probe.js'); // gRPC loads only when needed
  const r = await probeHealth({ socket: o.socket, service: '', timeoutMs: o.timeoutMs });
  if (r.code === 0) return 'SERVING';
  if (/EACCES|permission/i.test(r.message))
    throw new CliError(`permission denied on ipamd's socket ${o.socket}: run eni-ipam as root`, EXIT.permission);
  if (r.code === 1) return r.message.replace(/\s+/g, ' ');
  throw new CliError(`ipamd's socket ${o.socket} does not answer: ${r.message}`, EXIT.unreachable);
}
