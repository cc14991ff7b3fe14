/**
 * ipamd's CNI exec socket: runs CNI plugin invocations forwarded by the native shim
 * (cni-plugin/shim) in-process, with the same TypeScript plugin code the Node plugin
 * runs (cni-plugin/facade.ts: the verb handlers through `runInvocation`), so a pod ADD
 * costs no Node start-up. The plugin code gets this server's host (cni-plugin/host.ts):
 * ipamd's own IPAM service called directly for a config naming ipamd's socket (no
 * protobuf, no HTTP/2), a shared HTTP/2 session for any other socket, `ip` spawned from
 * the spawn helper, and the node netns. Wire format: protocol.ts. Unix socket, mode
 * 0600 (root only: whoever can write to it can wire pods).
 *
 * Before running anything, the server checks that running it here gives what the
 * shim's own process would: the shim's netns must be the node netns ipamd wires the
 * host side in (`nodeNetns`, default ipamd's own: the DaemonSet needs hostNetwork), and
 * for ADD/CHECK the pod netns path must name the same namespace for ipamd as for the
 * shim (a `/proc/<pid>/ns/net` path needs ipamd in the host PID namespace: hostPID; a
 * `/var/run/netns/...` one needs that directory mounted with HostToContainer
 * propagation). Otherwise it answers "F" with a reason that names the DaemonSet setting,
 * which the shim reports as a CNI error. While shutting down it answers "U" (not
 * serving). Once an invocation started, it runs to its end even if the shim went away
 * (its outcome is then unknown to the runtime, which retries: ADD and DEL are
 * idempotent at ipamd).
 *
 * Bounds (a client that never finishes must not hold ipamd's memory or fds): the whole
 * request must arrive within `requestDeadlineMs` of the accept (a deadline, not an idle
 * timeout: a byte every second does not extend it); at most `maxPending` connections
 * may be receiving a request at once and `maxConnections` be open in all; the bytes
 * held by requests still arriving are capped at `maxBufferedBytes` in total. A
 * connection over the pending cap is answered "U" (busy, nothing run: the shim's ADD
 * retries within its wait, a DEL is spooled); one over the deadline or the memory cap is
 * closed at once (nothing was run; the shim reports CNI error 11, the runtime retries).
 *
 * Stage trace (ipamd's `GET /v1/stage-trace`, service/stage-trace.ts): each invocation
 * records its marks as ms since the connection was accepted, `cni.<verb>.<mark>`:
 * `decoded` (whole request read), `checked` (netns checks done), `parsed` (config valid),
 * the verb's own (ADD: cni-plugin/add.ts, wiring.ts), `answered` (answer handed to the
 * socket); the spawn helper's `cni.spawn.call` (ms its fork and exec took) and
 * `cni.spawn.relay` (the two frames' share of the time to a started child).
 */
import { chmod } from 'node:fs/promises';
import { mkdirParents } from '../../nodefs/dirs.js';
import net from 'node:net';
import path from 'node:path';
import {
  connectIpamd,
  runInvocation,
  SessionPool,
  VERB_HANDLERS,
  type NetlinkHelper,
  type PluginHost,
  type VerbHandler,
} from '../../cni-plugin/facade.js';
import { createIpRunner } from '../../netfacts/ip-batch.js';
import type { IpamdClient } from '../../proto/ipamd-api.js';
import type { Logger } from '../log.js';
import { removeStaleSocket } from '../rpc/unix-listener.js';
import { stageTrace } from '../service/stage-trace.js';
import { acquireSpawnHelper, traceSpawn, type SpawnHelper } from './spawn-helper.js';
import { chooseNetlinkHelper } from './netlink-start.js';
import { netnsId, netnsRefusal } from './netns-check.js';
import { decodeRequest, encodeFallback, encodeResult, encodeUnavailable, type ExecRequest } from './protocol.js';

/** Default deadline (ms from accept) for a connection's whole request; the shim sends it in one go. */
export const REQUEST_DEADLINE_MS = 5_000;
/** Default cap on connections still receiving their request. */
export const MAX_PENDING = 64;
/** Default cap on open connections (receiving or running). */
export const MAX_CONNECTIONS = 256;
/** How long (ms) a shim has to read its answer once sent, before the connection is destroyed. */
export const ANSWER_READ_GRACE_MS = 10_000;
/** Default cap on bytes held by requests still arriving, all connections together (two 8 MiB configs fit). */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/** Options of {@link CniExecServer}. */
export interface CniExecServerOptions {
  /** Path of the Unix socket (its directory is created 0750). */
  socketPath: string;
  log: Logger;
  /**
   * Netns (path) the node side of pods is wired in; default ipamd's own
   * (`/proc/self/ns/net`). Only shims running in that netns are served.
   */
  nodeNetns?: string;
  /** Verb handlers (default: the plugin's, `VERB_HANDLERS` of cni-plugin/facade.ts). */
  handlers?: Readonly<Record<string, VerbHandler>>;
  /**
   * Path of the spawn helper (ipamd/cni-exec/spawn/eni-ipam-spawn.c) that starts `ip`/`nsenter`
   * so ipamd does not fork (spawn-helper.ts); default the one built beside the shim; false
   * = `child_process.spawn` from the event loop's thread.
   */
  spawnHelper?: string | false;
  /**
   * Path of the rtnetlink wiring helper (cni-plugin/netlink/eni-ipam-netlink.c) ADD wires
   * pods with, started once and kept (no process per ADD); default the one built beside
   * the shim (netlink-start.ts `BUNDLED_NETLINK_HELPER`) when it exists; false = wire with `ip` batches.
   */
  netlinkHelper?: string | false;
  /**
   * This ipamd, called directly by the plugin code when a config's `ipamdSocket` is
   * `socketPath` (`client`: ipamd/rpc/server.ts `RpcServer.directClient`, no protobuf, no
   * HTTP/2). Omit to always go over the socket.
   */
  ipamd?: { socketPath: string; client: IpamdClient };
  /** Writes an invocation's log line to the conflist's `logFile` (ipamd's rotating plugin log); false = append it plainly. */
  appendLog?: (file: string, line: string) => boolean;
  /** Whole-request deadline, ms from accept (default {@link REQUEST_DEADLINE_MS}). */
  requestDeadlineMs?: number;
  /** Connections receiving a request at once (default {@link MAX_PENDING}). */
  maxPending?: number;
  /** Open connections in all (default {@link MAX_CONNECTIONS}). */
  maxConnections?: number;
  /** Bytes held by partial requests, in total (default {@link MAX_BUFFERED_BYTES}). */
  maxBufferedBytes?: number;
}

/**
 * Sends the answer and half-closes; a peer that does not read it and close within
 * {@link ANSWER_READ_GRACE_MS} is destroyed (it must not hold an fd and the answer for ever).
 */
function answer(c: net.Socket, bytes: Buffer): void {
  c.end(bytes);
  const t = setTimeout(() => c.destroy(), ANSWER_READ_GRACE_MS);
  t.unref();
  c.once('close', () => clearTimeout(t));
}

/** The CNI exec server; see the module docstring. */
export class CniExecServer {
  private readonly server = net.createServer((c) => this.onConnection(c));
  private readonly inFlight = new Set<Promise<void>>();
  private nodeNetnsId = '';
  private closing = false;
  private pending = 0;
  private buffered = 0;
  /** Connections closed for a bound, by bound (for logs and tests). */
  readonly dropped = { deadline: 0, pending: 0, memory: 0 };
  private spawnHelper: SpawnHelper | undefined;
  private readonly sessions = new SessionPool();
  private host: PluginHost | undefined;
  private netlink: NetlinkHelper | undefined;

  constructor(private readonly o: CniExecServerOptions) {}

  /**
   * Binds the socket (a stale socket file is replaced), mode 0600.
   * @throws Error when another process serves on the socket, the path is not a socket,
   *   or the node netns cannot be read.
   */
  async listen(): Promise<void> {
    const sock = this.o.socketPath;
    this.nodeNetnsId = await netnsId(this.o.nodeNetns ?? '/proc/self/ns/net');
    if (this.nodeNetnsId.startsWith('!'))
      throw new Error(
        `cannot read the node netns ${this.o.nodeNetns ?? '/proc/self/ns/net'} (${this.nodeNetnsId.slice(1)})`,
      );
    await mkdirParents(path.dirname(sock), 0o750);
    await removeStaleSocket(sock);
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(sock, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.server.maxConnections = this.o.maxConnections ?? MAX_CONNECTIONS;
    await chmod(sock, 0o600);
    if (this.o.spawnHelper !== false) this.spawnHelper = acquireSpawnHelper(traceSpawn, this.o.spawnHelper);
    this.netlink = await chooseNetlinkHelper(this.o.netlinkHelper, this.o.nodeNetns, this.o.log);
    this.host = this.newPluginHost();
  }

  /**
   * The host handed to every invocation: ipamd's direct client for its own socket, a
   * pooled HTTP/2 channel for any other, `ip` from the spawn helper, the node netns.
   */
  private newPluginHost(): PluginHost {
    const own = this.o.ipamd;
    return {
      ipamd: (socketPath) =>
        own && socketPath === own.socketPath ? own.client : connectIpamd(socketPath, this.sessions),
      ip: createIpRunner(this.spawnHelper?.spawner),
      ...(this.o.nodeNetns ? { nodeNetns: this.o.nodeNetns } : {}),
      ...(this.netlink ? { netlink: this.netlink } : {}),
    };
  }

  /** The host handed to every invocation (built at {@link listen}; before it, one without the spawn helper). */
  get pluginHost(): PluginHost {
    this.host ??= this.newPluginHost();
    return this.host;
  }

  /** Invocations running now. */
  get running(): number {
    return this.inFlight.size;
  }

  /** Bytes held now by requests still arriving. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Connections receiving their request now. */
  get pendingConnections(): number {
    return this.pending;
  }

  /**
   * Stops accepting (the socket file goes: new shims wait (ADD) or spool (DEL)),
   * then waits for the running invocations to finish, at most `graceMs`.
   */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.inFlight.size !== 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inFlight]),
        new Promise<void>((r) => {
          timer = setTimeout(r, graceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    if (!this.inFlight.size) {
      this.sessions.close();
      this.netlink?.close();
      await this.spawnHelper?.stop();
    } else
      this.o.log.warn({ running: this.inFlight.size }, 'CNI exec: invocations still running after the shutdown grace');
  }

  private onConnection(c: net.Socket): void {
    c.on('error', () => undefined); // a shim that went away: nothing to answer
    if (this.pending >= (this.o.maxPending ?? MAX_PENDING)) {
      // Nothing will be run: say so ("U"), so the shim retries (ADD) or spools (DEL); its bytes are discarded.
      this.drop(
        c,
        'pending',
        { pending: this.pending },
        encodeUnavailable(`ipamd is busy: ${this.pending} connections are sending requests`),
      );
      return;
    }
    this.pending++;
    const accepted = performance.now();
    const chunks: Buffer[] = [];
    let size = 0;
    let need = 0;
    let receiving = true;
    const stopReceiving = () => {
      if (!receiving) return;
      receiving = false;
      this.pending--;
      this.buffered -= size;
      clearTimeout(deadline);
    };
    const deadline = setTimeout(() => {
      if (!receiving) return;
      stopReceiving();
      this.drop(c, 'deadline', { bytes: size });
    }, this.o.requestDeadlineMs ?? REQUEST_DEADLINE_MS);
    deadline.unref();
    c.on('close', stopReceiving);
    c.on('data', (d: Buffer) => {
      if (!receiving) return;
      if (this.buffered + d.length > (this.o.maxBufferedBytes ?? MAX_BUFFERED_BYTES)) {
        const bytes = size + d.length;
        stopReceiving();
        this.drop(c, 'memory', { bytes, bufferedBytes: this.buffered });
        return;
      }
      chunks.push(d);
      size += d.length;
      this.buffered += d.length;
      if (size < need) return; // decoding cannot progress before `need` bytes
      const r = decodeRequest(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      if (r.state === 'incomplete') {
        need = r.need;
        return;
      }
      stopReceiving();
      chunks.length = 0;
      if (r.state === 'refused') {
        this.o.log.warn({ reason: r.reason }, 'CNI exec: refused a request');
        answer(c, encodeFallback(r.reason));
        return;
      }
      const job = this.serve(c, r.request, accepted).catch((e: Error) => {
        this.o.log.error({ err: e.message }, 'CNI exec: invocation failed');
        c.destroy();
      });
      this.inFlight.add(job);
      void job.finally(() => this.inFlight.delete(job));
    });
  }

  /** Closes a connection over a bound (nothing was run) and counts it; with `unavailable`, answers it first. */
  private drop(
    c: net.Socket,
    bound: keyof CniExecServer['dropped'],
    info: Record<string, number>,
    unavailable?: Buffer,
  ): void {
    this.dropped[bound]++;
    if (this.dropped[bound] === 1 || this.dropped[bound] % 100 === 0) {
      this.o.log.warn(
        { bound, ...info, droppedSoFar: this.dropped[bound] },
        'CNI exec: closed a connection over a bound (nothing was run)',
      );
    }
    if (!unavailable) {
      c.destroy();
      return;
    }
    c.resume(); // discard what it sends
    answer(c, unavailable);
  }

  private async serve(c: net.Socket, req: ExecRequest, accepted: number): Promise<void> {
    const t0 = performance.now();
    const prefix = `cni.${(req.env.CNI_COMMAND ?? '').toLowerCase()}.`;
    const trace = (mark: string) => stageTrace.record(prefix + mark, performance.now() - accepted);
    trace('decoded');
    const who = {
      verb: req.env.CNI_COMMAND ?? '',
      containerId: req.env.CNI_CONTAINERID ?? '',
      netns: req.env.CNI_NETNS ?? '',
    };
    if (this.closing) {
      answer(c, encodeUnavailable('ipamd is shutting down'));
      return;
    }
    const why = await netnsRefusal(req, this.nodeNetnsId);
    trace('checked');
    if (why) {
      this.o.log.warn({ ...who, reason: why }, 'CNI exec: cannot run this invocation here');
      answer(c, encodeFallback(why));
      return;
    }
    let stdout = '';
    let stderr = '';
    const code = await runInvocation(this.o.handlers ?? VERB_HANDLERS, {
      env: req.env,
      readStdin: () => req.stdin,
      writeStdout: (s) => {
        stdout += s;
      },
      writeStderr: (s) => {
        stderr += s;
      },
      ctx: { host: this.pluginHost, trace },
      ...(this.o.appendLog ? { appendLog: this.o.appendLog } : {}),
    });
    this.o.log.debug(
      { ...who, exitCode: code, ms: Math.round((performance.now() - t0) * 10) / 10 },
      'CNI exec: invocation done',
    );
    if (c.destroyed) {
      this.o.log.warn(
        { ...who, exitCode: code },
        'CNI exec: the shim went away before the answer (the runtime will retry)',
      );
      return;
    }
    answer(c, encodeResult(code, stdout, stderr));
    trace('answered');
  }
}
