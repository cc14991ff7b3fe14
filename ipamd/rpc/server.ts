/**
 * ipamd's gRPC server: `eniipam.v1.CNIBackend` (proto/ipam.proto) and the standard
 * `grpc.health.v1.Health` service (grpc-health-check), on a Unix socket (docs/design.md#3-contracts:
 * mode 0660, stale socket removed at start, refused if another ipamd is listening; ./health-names.ts).
 *
 * Status codes: FAILED_PRECONDITION for API version skew, INVALID_ARGUMENT for a
 * request missing its key, RESOURCE_EXHAUSTED when no IP could be had within the
 * bounded wait, UNAVAILABLE while shutting down or not ready, INTERNAL otherwise.
 */
import { promises as fs } from 'node:fs';
import type net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import {
  CNI_BACKEND_SERVICE,
  IPAM_API_VERSION,
  type AddNetworkReply,
  type AddNetworkRequest,
  type CheckNetworkReply,
  type CheckNetworkRequest,
  type DelNetworkReply,
  type DelNetworkRequest,
  type GcNetworkReply,
  type GcNetworkRequest,
  type IpamStatusReply,
  type IpamStatusRequest,
  type NetworkRequestIds,
} from '../../proto/ipam.js';
import { IpamdCallError, type IpamdClient } from '../../proto/ipamd-api.js';
import type { Logger } from '../log.js';
import { PoolExhaustedError } from '../controller/pool-loop/pool-controller.js';
import type { IpamService } from '../service/ipam-service.js';
import { IpamdFailure } from '../service/ipamd-failure.js';
import { IpamdCause, tagCause } from '../../proto/ipamd-cause.js';
import { cniBackendService } from './service-def.js';
import { notServingYet } from './health-names.js';
import type { FamilyService } from '../service/family-service.js';
import { addReply, checkReply, delReply, gcReply, refuseFamily } from './family-replies.js';
import { listenUnixGrpc } from './unix-listener.js';

/** Options of {@link RpcServer}. */
export interface RpcServerOptions {
  socketPath: string;
  service: IpamService;
  log: Logger;
  vpcCidrs: () => string[];
  externalSnat: boolean;
  /** Called with each RPC's verb, outcome ("ok" or a status name) and latency in ms. */
  observe?: (verb: RpcVerb, outcome: string, ms: number) => void;
  /** Connection bounds (tests shorten them); default {@link RPC_CONNECTION_BOUNDS}. */
  connectionBounds?: Partial<RpcConnectionBounds>;
  /** `ipv6`/`dual` mode: the family-aware request path and the primary ENI (absent: `ipv4`). */
  family?: { service: FamilyService; primaryEniId: string };
}

/**
 * How long ipamd keeps a client connection on its gRPC socket (grpc-js server options,
 * gRFC A9 "Server-side Connection Management"; all in ms). The plugin opens one
 * connection per invocation and closes it, so an idle connection is a leak (a client
 * that died half-way, or a flood): it is closed after `idleMs` without a call, any
 * connection is drained after `maxAgeMs` (+ `ageGraceMs` for calls in flight), and one
 * whose peer stops answering HTTP/2 PINGs (`keepaliveMs`, `keepaliveTimeoutMs`) is dropped.
 * grpc-js has no connection cap of its own: ipamd accepts on its own `net.Server`
 * (`maxConnections`) and hands each connection to grpc-js (`createConnectionInjector`).
 */
export interface RpcConnectionBounds {
  /** Most client connections open at once; more are closed at accept (the plugin sees UNAVAILABLE: CNI "try again later"). */
  maxConnections: number;
  idleMs: number;
  maxAgeMs: number;
  ageGraceMs: number;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

/** Defaults of {@link RpcConnectionBounds}: ADD's own deadline is 15 s, so 30 s idle is generous. */
export const RPC_CONNECTION_BOUNDS: Readonly<RpcConnectionBounds> = Object.freeze({
  maxConnections: 1024,
  idleMs: 30_000,
  maxAgeMs: 300_000,
  ageGraceMs: 30_000,
  keepaliveMs: 60_000,
  keepaliveTimeoutMs: 20_000,
});

/**
 * grpc-js server options for `b`. Channelz (gRFC A14: per-call counters and timestamps for
 * a channelz service, which ipamd does not serve) is off: it costs a tracker object and
 * closures per call on ADD/DEL's path.
 */
export function grpcServerOptions(b: RpcConnectionBounds): grpc.ServerOptions {
  return {
    'grpc.enable_channelz': 0,
    'grpc.max_connection_idle_ms': b.idleMs,
    'grpc.max_connection_age_ms': b.maxAgeMs,
    'grpc.max_connection_age_grace_ms': b.ageGraceMs,
    'grpc.keepalive_time_ms': b.keepaliveMs,
    'grpc.keepalive_timeout_ms': b.keepaliveTimeoutMs,
  };
}

/** The RPCs of `CNIBackend`, by CNI verb: AddNetwork, DelNetwork, IpamStatus, GcNetwork, CheckNetwork. */
export type RpcVerb = 'add' | 'del' | 'status' | 'gc' | 'check';

class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

/** The gRPC front of ipamd. */
export class RpcServer {
  private readonly server: grpc.Server;
  private readonly bounds: RpcConnectionBounds;
  private listener?: net.Server;
  private readonly health = new HealthImplementation(notServingYet());
  private draining = false;
  /** The CNIBackend handlers by method name (`AddNetwork`), for in-process calls. */
  private readonly byName = new Map<string, (req: unknown) => Promise<RpcOutcome<unknown>>>();

  constructor(private readonly o: RpcServerOptions) {
    this.bounds = { ...RPC_CONNECTION_BOUNDS, ...o.connectionBounds };
    this.server = new grpc.Server(grpcServerOptions(this.bounds));
    const service = cniBackendService();
    const handlers: Record<string, (req: unknown) => Promise<RpcOutcome<unknown>>> = {
      AddNetwork: (req) => this.run('add', req as AddNetworkRequest, (r) => this.addNetwork(r)),
      DelNetwork: (req) => this.run('del', req as DelNetworkRequest, (r) => this.delNetwork(r)),
      IpamStatus: (req) => this.run('status', req as IpamStatusRequest, async (r) => this.ipamStatus(r)),
      GcNetwork: (req) => this.run('gc', req as GcNetworkRequest, (r) => this.gcNetwork(r)),
      CheckNetwork: (req) => this.run('check', req as CheckNetworkRequest, async (r) => this.checkNetwork(r)),
    };
    const impl: grpc.UntypedServiceImplementation = {};
    for (const [name, run] of Object.entries(handlers)) {
      impl[name] = ((call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
        void run(call.request).then((o) => (o.ok ? cb(null, o.reply) : cb({ code: o.code, details: o.details })));
      }) as grpc.handleUnaryCall<unknown, unknown>;
      this.byName.set(name, run);
    }
    this.server.addService(service, impl);
    this.health.addToServer(this.server);
  }

  /**
   * A client of this server for code running in this process (the CNI exec server hands
   * it to the plugin code as its way to reach ipamd; cni-plugin/host.ts): each call runs
   * the same handler as a call over the socket — request checks, draining rule, status
   * codes, metrics — on the request object itself, without protobuf encoding or HTTP/2.
   * Deadlines as on the wire: DEADLINE_EXCEEDED once `timeoutMs` passes (the handler's
   * work is not cancelled, as a gRPC server may also finish after a deadline).
   * @returns an {@link IpamdClient} whose calls throw IpamdCallError with the status a
   *   socket call would get; `close()` does nothing.
   */
  directClient(): IpamdClient {
    const call = <Rep>(method: string, req: unknown, timeoutMs: number): Promise<Rep> =>
      new Promise<Rep>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new IpamdCallError(
                method,
                grpc.status.DEADLINE_EXCEEDED,
                `in-process ${method}: deadline of ${timeoutMs} ms exceeded`,
              ),
            ),
          timeoutMs,
        );
        timer.unref();
        void this.byName.get(method)!(req).then((o) => {
          clearTimeout(timer);
          if (o.ok) resolve(o.reply as Rep);
          else reject(new IpamdCallError(method, o.code, o.details));
        });
      });
    return {
      addNetwork: (req, timeoutMs) => call('AddNetwork', req, timeoutMs),
      delNetwork: (req, timeoutMs) => call('DelNetwork', req, timeoutMs),
      ipamStatus: (req, timeoutMs) => call('IpamStatus', req, timeoutMs),
      gcNetwork: (req, timeoutMs) => call('GcNetwork', req, timeoutMs),
      checkNetwork: (req, timeoutMs) => call('CheckNetwork', req, timeoutMs),
      close: () => undefined,
    };
  }

  /**
   * Binds the Unix socket (creating its directory 0750), sets mode 0660, reports SERVING.
   * At most `maxConnections` client connections are open at once ({@link RpcConnectionBounds}).
   * @throws Error if another process is already serving on the socket.
   */
  async listen(): Promise<void> {
    const { listener } = await listenUnixGrpc(this.server, this.o.socketPath, {
      maxConnections: this.bounds.maxConnections,
      dirMode: 0o750,
      onError: (e) => this.o.log.error({ err: e.message }, 'gRPC socket error'),
    });
    this.listener = listener;
    this.health.setStatus('', 'SERVING');
    this.health.setStatus(CNI_BACKEND_SERVICE, 'SERVING');
  }

  /**
   * Stops taking new RPCs (health NOT_SERVING, new calls UNAVAILABLE) and resolves when
   * the in-flight ones have finished, or after `graceMs` (then they are cancelled).
   */
  async shutdown(graceMs: number): Promise<void> {
    this.draining = true;
    this.listener?.close();
    this.health.setStatus('', 'NOT_SERVING');
    this.health.setStatus(CNI_BACKEND_SERVICE, 'NOT_SERVING');
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(t);
        resolve();
      });
    });
    await fs.rm(this.o.socketPath, { force: true });
  }

  private async addNetwork(req: AddNetworkRequest): Promise<AddNetworkReply> {
    checkRequest(req);
    const base = { vpc_v4_cidrs: this.o.vpcCidrs(), use_external_snat: this.o.externalSnat };
    const f = this.o.family;
    const refused = refuseFamily(req, f?.service.mode ?? 'ipv4', base);
    if (refused) return refused;
    const add = {
      networkName: req.network_name,
      containerID: req.container_id,
      ifName: req.if_name,
      netns: req.netns,
      ...(req.k8s_pod_name
        ? { pod: { name: req.k8s_pod_name, namespace: req.k8s_pod_namespace, uid: req.k8s_pod_uid } }
        : {}),
    };
    if (f) return addReply(await f.service.add(add), f.service.mode, base, f.primaryEniId);
    const r = await this.o.service.add(add);
    return {
      ip_family: 'ipv4',
      success: true,
      ipv4_addr: r.allocation.ipv4,
      ipv6_addr: '',
      device_number: r.eni.deviceNumber,
      route_table_id: r.routeTableId,
      vpc_v4_cidrs: this.o.vpcCidrs(),
      use_external_snat: this.o.externalSnat,
      eni_id: r.eni.eniId,
      message: r.existing ? 'already assigned' : '',
    };
  }

  private async delNetwork(req: DelNetworkRequest): Promise<DelNetworkReply> {
    checkRequest(req);
    const key = { networkName: req.network_name, containerID: req.container_id, ifName: req.if_name };
    if (this.o.family) return delReply(await this.o.family.service.del(key, req.reason || 'unspecified'));
    const r = await this.o.service.del(key, req.reason || 'unspecified');
    return {
      success: true,
      released: r.released,
      ipv4_addr: r.allocation?.ipv4 ?? '',
      device_number: r.eni?.deviceNumber ?? 0,
      route_table_id: r.routeTableId ?? 0,
      message: r.released ? '' : 'no IP held by this container',
    };
  }

  /** CNI STATUS: can an ADD get an address now (code 50 with the reason when not). */
  private ipamStatus(req: IpamStatusRequest): IpamStatusReply {
    checkApiVersion(req);
    const s = this.o.service.status();
    const ip_family = this.o.family?.service.mode ?? 'ipv4';
    if (ip_family === 'ipv6') return { can_serve: true, code: 0, message: '', ip_family };
    return { can_serve: s.canServe, code: s.code, message: s.message, ip_family };
  }

  /** CNI GC: releases the network's allocations that are not in `valid_attachments`, durably. */
  private async gcNetwork(req: GcNetworkRequest): Promise<GcNetworkReply> {
    checkApiVersion(req);
    if (!req.network_name) throw new RpcError(grpc.status.INVALID_ARGUMENT, 'request lacks network_name');
    const valid = req.valid_attachments ?? [];
    const bad = valid.findIndex((v) => !v.container_id || !v.if_name);
    if (bad >= 0)
      throw new RpcError(grpc.status.INVALID_ARGUMENT, `valid_attachments[${bad}] lacks container_id or if_name`);
    const attachments = valid.map((v) => ({ containerID: v.container_id, ifName: v.if_name }));
    if (this.o.family) return gcReply(await this.o.family.service.gc(req.network_name, attachments));
    const released = await this.o.service.gc(req.network_name, attachments);
    return gcReply(
      released.map(({ allocation: a, routeTableId }) => ({
        key: a,
        ipv4: a.ipv4,
        routeTableId: routeTableId ?? 0,
        ...(a.pod ? { pod: a.pod } : {}),
      })),
    );
  }

  /** CNI CHECK: what the key holds; never assigns. */
  private checkNetwork(req: CheckNetworkRequest): CheckNetworkReply {
    checkRequest(req);
    const key = { networkName: req.network_name, containerID: req.container_id, ifName: req.if_name };
    if (this.o.family) return checkReply(this.o.family.service, key, this.o.family.primaryEniId);
    const r = this.o.service.lookup(key);
    if (!r) return { held: false, ipv4_addr: '', device_number: 0, route_table_id: 0, eni_id: '' };
    return {
      held: true,
      ipv4_addr: r.allocation.ipv4,
      device_number: r.eni?.deviceNumber ?? 0,
      route_table_id: r.routeTableId ?? 0,
      eni_id: r.allocation.eniId,
      ip_family: 'ipv4',
    };
  }

  /** Runs one handler with the draining rule, the error → status mapping and the metrics. Never rejects. */
  private async run<Req, Rep>(verb: RpcVerb, req: Req, fn: (req: Req) => Promise<Rep>): Promise<RpcOutcome<Rep>> {
    const t0 = performance.now();
    if (this.draining) {
      this.o.observe?.(verb, 'UNAVAILABLE', 0);
      return {
        ok: false,
        code: grpc.status.UNAVAILABLE,
        details: tagCause(IpamdCause.ShuttingDown, 'ipamd is shutting down'),
      };
    }
    try {
      const reply = await fn(req);
      this.o.observe?.(verb, 'ok', performance.now() - t0);
      return { ok: true, reply };
    } catch (err) {
      const e = err as Error;
      // Failed while ipamd stops (e.g. an ADD whose refill wait ran out during the drain): that is the cause to report.
      if (this.draining && !(e instanceof RpcError)) {
        this.o.observe?.(verb, 'UNAVAILABLE', performance.now() - t0);
        return { ok: false, code: grpc.status.UNAVAILABLE, details: tagCause(IpamdCause.ShuttingDown, e.message) };
      }
      const code =
        e instanceof RpcError
          ? e.code
          : e instanceof PoolExhaustedError || (e instanceof IpamdFailure && e.noAddress)
            ? grpc.status.RESOURCE_EXHAUSTED
            : e instanceof IpamdFailure
              ? grpc.status.UNAVAILABLE
              : grpc.status.INTERNAL;
      this.o.observe?.(verb, grpc.status[code] ?? String(code), performance.now() - t0);
      if (code === grpc.status.INTERNAL) this.o.log.error({ verb, err: e.message }, 'RPC failed');
      return { ok: false, code, details: e instanceof IpamdFailure ? e.details : e.message };
    }
  }
}

/** What a handler run ended with: the reply, or the gRPC status to answer. */
type RpcOutcome<Rep> = { ok: true; reply: Rep } | { ok: false; code: grpc.status; details: string };

function checkRequest(req: NetworkRequestIds): void {
  checkApiVersion(req);
  const missing = (['container_id', 'if_name', 'network_name'] as const).filter((f) => !req[f]);
  if (missing.length) throw new RpcError(grpc.status.INVALID_ARGUMENT, `request lacks ${missing.join(', ')}`);
}

function checkApiVersion(req: { api_version: number; client_version: string }): void {
  if (req.api_version !== IPAM_API_VERSION) {
    throw new RpcError(
      grpc.status.FAILED_PRECONDITION,
      `plugin speaks ipam API version ${req.api_version || 'unknown'} (client ${req.client_version || 'unknown'}); this ipamd speaks version ${IPAM_API_VERSION}: upgrade the plugin and ipamd together`,
    );
  }
}
