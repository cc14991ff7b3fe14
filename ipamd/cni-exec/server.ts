/**
 * ipamd's CNI exec socket: runs CNI plugin invocations forwarded by the native shim
 * (cni-plugin/shim) in-process, with the same TypeScript plugin code the Node plugin
 * runs (cni-plugin/handlers.ts through `runInvocation`), so a pod ADD costs no Node
 * start-up. Wire format: protocol.ts. Unix socket, mode 0600 (root only: whoever can
 * write to it can wire pods).
 *
 * Before running anything, the server checks that running it here gives what the
 * shim's own process would: the shim's netns must be the node netns ipamd wires the
 * host side in (`nodeNetns`, default ipamd's own), and for ADD/CHECK the pod netns path
 * must name the same namespace for ipamd as for the shim (a `/proc/<pid>/ns/net` path
 * needs ipamd in the host PID namespace, a `/var/run/netns/...` one needs the mount
 * propagated into ipamd's container). Otherwise it answers "F" and the shim runs the
 * Node plugin itself. Once an invocation started, it runs to its end even if the shim
 * went away (its outcome is then unknown to the runtime, which retries: ADD and DEL are
 * idempotent at ipamd).
 */
import { chmod, mkdir, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { shareUnixSessions } from '../../cni-plugin/grpc-http2.js';
import { registerInProcessEndpoint, type InProcessUnary } from '../../cni-plugin/in-process-endpoint.js';
import { VERB_HANDLERS } from '../../cni-plugin/handlers.js';
import { runInvocation, type VerbHandler } from '../../cni-plugin/invocation.js';
import type { Logger } from '../log.js';
import { removeStaleSocket } from '../rpc/server.js';
import { startSpawnWorker, type SpawnWorker } from './spawn-worker.js';
import { decodeRequest, encodeFallback, encodeResult, type ExecRequest } from './protocol.js';

/** How long a connection may take to deliver its whole request (ms) before it is dropped. */
export const REQUEST_READ_TIMEOUT_MS = 10_000;

/** Verbs that enter the pod netns by its path (DEL, GC, STATUS, VERSION never do). */
const ENTERS_POD_NETNS = new Set(['ADD', 'CHECK']);

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
  /** Verb handlers (default: the plugin's, cni-plugin/handlers.ts). */
  handlers?: Readonly<Record<string, VerbHandler>>;
  /**
   * Start `ip`/`nsenter` from a worker thread (spawn-worker.ts; default true): forking
   * ipamd from the main thread stalls the event loop that answers the same ADD's RPC.
   */
  spawnInWorker?: boolean;
  /**
   * This ipamd's gRPC server, called in-process by the plugin code when a config's
   * `ipamdSocket` is `socketPath` (cni-plugin/in-process-endpoint.ts): same bytes, no
   * HTTP/2 round trip. Omit to always go over the socket.
   */
  inProcessIpamd?: { socketPath: string; invoke: InProcessUnary };
  /** Writes an invocation's log line to the conflist's `logFile` (ipamd's rotating plugin log); false = append it plainly. */
  appendLog?: (file: string, line: string) => boolean;
}

/** `<dev>:<ino>` of the namespace file at `p` (what the shim sends), or `!<code>` when stat fails. */
export async function netnsId(p: string): Promise<string> {
  try {
    const s = await stat(p, { bigint: true });
    return `${s.dev}:${s.ino}`;
  } catch (e) {
    return `!${(e as NodeJS.ErrnoException).code ?? 'error'}`;
  }
}

/** The CNI exec server; see the module docstring. */
export class CniExecServer {
  private readonly server = net.createServer((c) => this.onConnection(c));
  private readonly inFlight = new Set<Promise<void>>();
  private nodeNetnsId = '';
  private closing = false;
  private spawnWorker: SpawnWorker | undefined;
  private unregisterIpamd: (() => void) | undefined;

  constructor(private readonly o: CniExecServerOptions) {}

  /**
   * Binds the socket (a stale socket file is replaced), mode 0600.
   * @throws Error when another process serves on the socket, the path is not a socket,
   *   or the node netns cannot be read.
   */
  async listen(): Promise<void> {
    const sock = this.o.socketPath;
    this.nodeNetnsId = await netnsId(this.o.nodeNetns ?? '/proc/self/ns/net');
    if (this.nodeNetnsId.startsWith('!')) throw new Error(`cannot read the node netns ${this.o.nodeNetns ?? '/proc/self/ns/net'} (${this.nodeNetnsId.slice(1)})`);
    await mkdir(path.dirname(sock), { recursive: true, mode: 0o750 });
    await removeStaleSocket(sock);
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(sock, () => { this.server.off('error', reject); resolve(); });
    });
    await chmod(sock, 0o600);
    if (this.o.spawnInWorker ?? true) this.spawnWorker = startSpawnWorker();
    shareUnixSessions(true); // the plugin code's calls to ipamd reuse one connection
    if (this.o.inProcessIpamd) this.unregisterIpamd = registerInProcessEndpoint(this.o.inProcessIpamd.socketPath, this.o.inProcessIpamd.invoke);
  }

  /** Invocations running now. */
  get running(): number {
    return this.inFlight.size;
  }

  /**
   * Stops accepting (the socket file goes, so new shims fall back to the Node plugin),
   * then waits for the running invocations to finish, at most `graceMs`.
   */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.inFlight.size !== 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.inFlight]),
        new Promise<void>((r) => { timer = setTimeout(r, graceMs); }),
      ]);
      clearTimeout(timer);
    }
    if (!this.inFlight.size) {
      this.unregisterIpamd?.();
      shareUnixSessions(false);
      await this.spawnWorker?.stop();
    }
    else this.o.log.warn({ running: this.inFlight.size }, 'CNI exec: invocations still running after the shutdown grace');
  }

  private onConnection(c: net.Socket): void {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    c.setTimeout(REQUEST_READ_TIMEOUT_MS, () => { if (!done) c.destroy(); });
    c.on('error', () => undefined); // a shim that went away: nothing to answer
    c.on('data', (d: Buffer) => {
      if (done) return;
      chunks.push(d);
      size += d.length;
      const r = decodeRequest(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      if (r.state === 'incomplete') return;
      done = true;
      c.setTimeout(0);
      if (r.state === 'refused') {
        this.o.log.warn({ reason: r.reason }, 'CNI exec: refused a request, the shim falls back');
        c.end(encodeFallback(r.reason));
        return;
      }
      const job = this.serve(c, r.request).catch((e: Error) => {
        this.o.log.error({ err: e.message }, 'CNI exec: invocation failed');
        c.destroy();
      });
      this.inFlight.add(job);
      void job.finally(() => this.inFlight.delete(job));
    });
  }

  /** Why this request must not run here, or undefined when it may. */
  private async refusal(req: ExecRequest): Promise<string | undefined> {
    if (this.closing) return 'ipamd is shutting down';
    if (req.selfNetns !== this.nodeNetnsId) {
      return `the plugin runs in netns ${req.selfNetns}, ipamd wires the node side in ${this.nodeNetnsId}`;
    }
    const netns = req.env.CNI_NETNS ?? '';
    if (ENTERS_POD_NETNS.has(req.env.CNI_COMMAND ?? '') && netns !== '') {
      if (req.podNetns.startsWith('!')) return `the plugin cannot stat CNI_NETNS ${netns} (${req.podNetns.slice(1)})`;
      const mine = await netnsId(netns);
      if (mine !== req.podNetns) {
        return `CNI_NETNS ${netns} is ${req.podNetns} for the plugin but ${mine.startsWith('!') ? `not visible to ipamd (${mine.slice(1)})` : mine} for ipamd (ipamd needs hostPID and /var/run/netns mounted with HostToContainer propagation)`;
      }
    }
    return undefined;
  }

  private async serve(c: net.Socket, req: ExecRequest): Promise<void> {
    const t0 = performance.now();
    const why = await this.refusal(req);
    const who = { verb: req.env.CNI_COMMAND ?? '', containerId: req.env.CNI_CONTAINERID ?? '', netns: req.env.CNI_NETNS ?? '' };
    if (why) {
      this.o.log.info({ ...who, reason: why }, 'CNI exec: not run here, the shim falls back to the Node plugin');
      c.end(encodeFallback(why));
      return;
    }
    let stdout = '';
    let stderr = '';
    const code = await runInvocation(this.o.handlers ?? VERB_HANDLERS, {
      env: req.env,
      readStdin: () => req.stdin,
      writeStdout: (s) => { stdout += s; },
      writeStderr: (s) => { stderr += s; },
      ctx: this.o.nodeNetns ? { nodeNetns: this.o.nodeNetns } : {},
      ...(this.o.appendLog ? { appendLog: this.o.appendLog } : {}),
    });
    this.o.log.debug({ ...who, exitCode: code, ms: Math.round((performance.now() - t0) * 10) / 10 }, 'CNI exec: invocation done');
    if (c.destroyed) {
      this.o.log.warn({ ...who, exitCode: code }, 'CNI exec: the shim went away before the answer (the runtime will retry)');
      return;
    }
    c.end(encodeResult(code, stdout, stderr));
  }
}
