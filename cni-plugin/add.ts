/**
 * CNI ADD (docs/design.md#1-the-parts-and-how-a-pod-gets-its-ip steps 2-5): ask ipamd for an IP, wire the netns, return the result.
 * What needs no IP (veth pair, links up, pod routes, neighbour) is wired while ipamd
 * answers (its answer waits for its checkpoint fsync), then the pod address, host route
 * and rules go in. If anything fails after ipamd assigned the IP (wiring, building or
 * serialising the result), what was created is removed and the IP is handed back to
 * ipamd (`DelNetwork` reason "add-failed", or "ip-conflict" when the node already routes
 * the IP to another pod) before the error is reported; if ipamd gives no IP, the veth is
 * removed.
 *
 * Stage trace marks (`ctx.trace`, ipamd's exec server; bench/cni-vs-go.ts prints them):
 * `ipamd-replied` (the AddNetwork answer is in), `finished` (wired, result serialised),
 * plus startWiring's.
 */
import {
  DEL_REASON_IP_CONFLICT,
  type AddNetworkReply,
  type IpFamilyMode,
  type NetworkRequestIds,
} from '../proto/ipam.js';
import { requireEnv, type CniEnv } from './env.js';
import { chainAddResult } from './chain.js';
import { asCniError, type CniError } from './errors.js';
import { CNI_ERRORS, cniError, type CniErrorId } from './error-catalogue.js';
import { IpamdCause, splitCause, type IpamdCauseName } from '../proto/ipamd-cause.js';
import { GrpcStatus } from '../proto/grpc-status.js';
import type { VerbContext } from './invocation.js';
import { IpamdCallError, RETRYABLE_STATUSES, type IpamdClient } from '../proto/ipamd-api.js';
import { describeAddresses, EGRESS_IFNAME, expectedFamily, readPodAddresses } from './families.js';
import type { NodeSide, PluginHost } from './host.js';
import { egressVeth } from './wiring-plan.js';
import { hostOf } from './process-host.js';
import type { NetConf } from './netconf.js';
import { networkIds } from './request.js';
import { startNetlinkWiring } from './netlink-wiring.js';
import { encodeAddResult, type AddResult } from './result.js';
import { hostVethMac, hostVethName, podVethMac, vethOwnerOf } from './veth-name.js';
import { IpConflictError, startWiring, unwire, type PendingWiring, type VethPlan, type WiringPlan } from './wiring.js';

/**
 * Deadline of `AddNetwork` in ms: ipamd may wait (bounded) on a pool refill, up to
 * ENI_IPAM_ADD_WAIT_FOR_ENI_TIMEOUT (at most 50 s) while a new ENI is being created.
 * Below the shim's answer deadline (110 s) and kubelet's runtime request timeout (2 min).
 */
export const ADD_TIMEOUT_MS = 60_000;
/** Deadline of the "add-failed" `DelNetwork` in ms. */
export const ROLLBACK_TIMEOUT_MS = 5_000;

/** The catalogue entry of each cause ipamd tags a failure with (proto/ipamd-cause.ts). */
const BY_CAUSE: Record<IpamdCauseName, CniErrorId> = {
  [IpamdCause.Checkpoint]: 'add-checkpoint',
  [IpamdCause.ShuttingDown]: 'ipamd-restarting',
  [IpamdCause.Unverified]: 'add-unverified',
  [IpamdCause.Throttled]: 'add-throttled',
  [IpamdCause.NotReady]: 'add-not-ready',
};

/**
 * Maps a failed `AddNetwork` to a CNI error (docs/design.md#cni-errors): a cause ipamd
 * tagged (checkpoint write failed, shutting down, addresses unverified, EC2 throttled,
 * restored IP not visible) → its entry, code 11; any other retryable gRPC status
 * (RETRYABLE_STATUSES) → 11, `add-no-ip` for RESOURCE_EXHAUSTED; FAILED_PRECONDITION →
 * 100 version skew; other statuses → 100; no answer at all → 11 `ipamd-unreachable`.
 * `details` is ipamd's message without the tag.
 */
export function addFailure(e: unknown): CniError {
  if (e instanceof IpamdCallError) {
    const { cause, message } = splitCause(e.details);
    const details = `${e.statusName}: ${message}`;
    if (cause) return cniError(BY_CAUSE[cause], details);
    if (RETRYABLE_STATUSES.includes(e.status))
      return cniError(e.status === GrpcStatus.RESOURCE_EXHAUSTED ? 'add-no-ip' : 'ipamd-transient', details);
    if (e.status === GrpcStatus.FAILED_PRECONDITION) return cniError('ipamd-skew', details);
    return cniError('ipamd-refused', details);
  }
  return cniError('ipamd-unreachable', e instanceof Error ? e.message : String(e));
}

/** The veth plan of `env`'s attachment before ipamd answers, for the family stage 1 prepares. */
function vethPlanOf(env: CniEnv, conf: NetConf, family: IpFamilyMode): VethPlan {
  return {
    netns: env.netns,
    ifName: env.ifName,
    hostVeth: hostVethName(conf.vethPrefix, vethOwnerOf(env)),
    hostMac: hostVethMac(env.containerId, env.ifName),
    podMac: podVethMac(env.containerId, env.ifName),
    mtu: conf.mtu,
    family,
    ...(family === 'ipv6' ? { egress: egressVeth(env.containerId, env.ifName) } : {}),
  };
}

/** Stage 1 of the wiring of `veth`: through ipamd's netlink helper (its fast path, every family) when there is one, else two `ip` batches. */
function startFor(veth: VethPlan, host: PluginHost, trace: VerbContext['trace']): PendingWiring {
  if (veth.family === 'ipv6' && veth.ifName === EGRESS_IFNAME)
    return failedWiring(cniError('egress-ifname', '', { ifName: veth.ifName }));
  return host.netlink ? startNetlinkWiring(veth, host, host.netlink, trace) : startWiring(veth, host, trace);
}

/** A wiring that never started: `finish` throws `e`, `abort` does nothing. */
const failedWiring = (e: Error): PendingWiring => ({
  finish: () => Promise.reject(e),
  abort: () => Promise.resolve(),
});

/**
 * Runs ADD. `warnings` collects non-fatal problems for the log.
 * @returns the result in `conf.cniVersion` (after `prevResult`'s entries in a conflist),
 *   the same serialised (`json`, what is printed) and the pod's addresses (`ip`, for the log).
 * @throws CniError: 4 bad env or CNI_NETNS is the node's namespace, 7 the config's
 *   `ipFamily` is not the mode the node serves (the message names both), 11 ipamd
 *   unavailable / no IP now / the IP is already routed to another pod on this node
 *   (IpConflictError; ipamd is told with reason "ip-conflict" and quarantines it), 100
 *   ipamd refused or answered without every address of its mode, 5 wiring failed (netns
 *   missing, ip error) or anything else after the assignment (then the wiring is removed
 *   and the addresses returned first).
 */
export async function cmdAdd(
  env: CniEnv,
  conf: NetConf,
  warnings: string[],
  ctx: VerbContext = {},
): Promise<{ result: AddResult | Record<string, unknown>; json: string; ip: string }> {
  requireEnv(env, 'ADD');
  const ids = networkIds(env, conf);
  let veth = vethPlanOf(env, conf, expectedFamily(conf));
  const host = hostOf(ctx);
  const ipamd = host.ipamd(conf.ipamdSocket);
  // The request goes first; everything that needs no IP is wired while ipamd assigns one
  // (and persists it).
  const asked = ipamd.addNetwork({ ...ids, ip_family: conf.ipFamily }, ADD_TIMEOUT_MS);
  asked.catch(() => undefined); // awaited below, after the wiring started
  const trace = ctx.trace;
  let wiring = startFor(veth, host, trace);
  try {
    let reply: AddNetworkReply;
    try {
      reply = await asked;
      trace?.('ipamd-replied');
    } catch (e) {
      await wiring.abort();
      throw addFailure(e);
    }
    const verdict = readPodAddresses(reply, conf.ipFamily);
    if (!verdict.ok) {
      await wiring.abort();
      if (verdict.giveBack) await giveBack(ipamd, ids, 'add-failed', describeReply(reply), warnings);
      throw verdict.error;
    }
    const a = verdict.addrs;
    if (a.family !== veth.family || !!veth.egress !== !!a.egressV4) {
      // `ipFamily: auto` on a node not serving IPv4, or no egress address: wire the served family instead.
      await wiring.abort();
      veth = vethPlanOf(env, conf, a.family);
      if (!a.egressV4) delete veth.egress;
      wiring = startFor(veth, host, trace);
    }
    const plan: WiringPlan = {
      ...veth,
      ipv4: a.ipv4,
      routeTableId: reply.route_table_id,
      ...(a.ipv6 ? { ipv6: a.ipv6 } : {}),
      ...(a.egressV4 ? { egressV4: a.egressV4 } : {}),
    };
    return await finishAdd(plan, wiring, { env, conf, ids, ipamd, host, warnings, trace });
  } finally {
    ipamd.close();
  }
}

/** Tells ipamd to release the key after a refused or failed ADD; a failure is only a warning. */
async function giveBack(
  ipamd: IpamdClient,
  ids: NetworkRequestIds,
  reason: string,
  what: string,
  warnings: string[],
): Promise<void> {
  await ipamd.delNetwork({ ...ids, reason }, ROLLBACK_TIMEOUT_MS).catch((err: Error) => {
    warnings.push(`could not return ${what} to ipamd after the failed ADD: ${err.message}`);
  });
}

const describeReply = (r: AddNetworkReply): string =>
  describeAddresses({ ipv4: r.ipv4_addr, ipv6: r.ipv6_addr, egressV4: r.egress_v4_addr ?? '' }) || 'the key';

/**
 * Stage 2 and the result: finishes `wiring` with `plan`, builds and serialises the
 * result; any failure removes the wiring and gives the addresses back (reason
 * "ip-conflict" when the node already routes one of them to another pod).
 */
async function finishAdd(
  plan: WiringPlan,
  wiring: PendingWiring,
  c: {
    env: CniEnv;
    conf: NetConf;
    ids: NetworkRequestIds;
    ipamd: IpamdClient;
    host: NodeSide;
    warnings: string[];
    trace: VerbContext['trace'];
  },
): Promise<{ result: AddResult | Record<string, unknown>; json: string; ip: string }> {
  const what = describeAddresses(plan);
  let wired = false;
  try {
    await wiring.finish(plan);
    wired = true;
    const result = encodeAddResult(c.conf.cniVersion, {
      hostVeth: { name: plan.hostVeth, mac: plan.hostMac },
      pod: { ifName: c.env.ifName, mac: plan.podMac, netns: c.env.netns },
      ipv4: plan.ipv4,
      ...(plan.ipv6 ? { ipv6: plan.ipv6 } : {}),
      ...(plan.egress && plan.egressV4
        ? {
            egress: {
              hostVeth: { name: plan.egress.hostVeth, mac: plan.egress.hostMac },
              pod: { ifName: plan.egress.ifName, mac: plan.egress.podMac },
              ipv4: plan.egressV4,
            },
          }
        : {}),
      mtu: plan.mtu,
    });
    const chained = chainAddResult(result, c.conf.prevResult);
    // Serialised here, inside the rollback: nothing that can fail comes after the IP is kept.
    const json = JSON.stringify(chained);
    c.trace?.('finished');
    return { result: chained, json, ip: what };
  } catch (e) {
    // Any failure after the assignment gives everything back: the wiring, then the addresses.
    if (wired) await unwire(plan, c.host);
    const conflict = e instanceof IpConflictError;
    await giveBack(c.ipamd, c.ids, conflict ? DEL_REASON_IP_CONFLICT : 'add-failed', what, c.warnings);
    if (conflict) c.warnings.push(`refused ${(e as IpConflictError).ipv4}: ${(e as IpConflictError).msg}`);
    throw asCniError(e, CNI_ERRORS['add-rolled-back'].code, CNI_ERRORS['add-rolled-back'].msg);
  }
}
