/**
 * The node's kernel as restore evidence (docs/design.md#4-restore-after-restart rule 5), the I/O half: one
 * `ip -json -batch -` process per evidence pass (routes of the main table, veths, ip
 * rules; kernel-parse.ts decides what they vouch for). It runs in ipamd's own network
 * namespace, or in `netnsPath` (ENI_IPAM_CNI_EXEC_NETNS, where the plugin wires the node
 * side when ipamd runs outside the node's namespace) through `nsenter --net=`, with the
 * `ip` runner the plugin's wiring uses (netfacts/ip-batch.ts).
 *
 * The read is all-or-nothing: a command that fails, times out or prints what does not
 * parse throws {@link KernelUnavailableError}; the caller counts the kernel as unreadable
 * and freezes releases, never as "no pods".
 */
import { createIpRunner, localSpawner, type IpRun, type IpRunner } from '../../netfacts/ip-batch.js';
import {
  addKernelV6Routes,
  KERNEL_BATCH,
  KERNEL_V6_BATCH,
  parseKernelOutput,
  type KernelEvidence,
} from './kernel-parse.js';

/** Anything that reads the kernel's pod wiring, throwing when it cannot (KernelSource). */
export interface KernelReader {
  readKernel(): Promise<KernelEvidence>;
}

/** The kernel could not be read, or its answer did not parse. */
export class KernelUnavailableError extends Error {
  override name = 'KernelUnavailableError';
}

/** Deadline of one read, ms (a healthy node answers in ~5 ms; docs/design.md#4-restore-after-restart: a source's timeout ≤ 5 s). */
export const KERNEL_READ_TIMEOUT_MS = 5000;

/** Largest output accepted, bytes (~250 bytes a route/link/rule: room for tens of thousands). */
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;

/** Options of {@link KernelSource}. */
export interface KernelSourceOptions {
  /** The `ip` binary (default `ip` on PATH). Tests point it at a script printing garbage. */
  ipPath?: string;
  /** Network namespace to read (a path such as `/var/run/netns/x`); default ipamd's own. */
  netnsPath?: string;
  /** Deadline of one read, ms (1..5000; default 5000). */
  timeoutMs?: number;
  /**
   * The `ip` runner of each read, asked at every read (ignored with `ipPath`): e.g. the CNI
   * exec server's, which starts `ip` through its spawn helper, so ipamd does not fork (1–3.5
   * ms of a small ipamd's event loop, tens of ms in a large process, plus copy-on-write faults).
   * Undefined (or returning undefined): fork from this thread.
   */
  ipRunner?: () => IpRunner | undefined;
  /**
   * Also read the IPv6 route table (`ipv6`/`dual` mode): a second `ip -6 -json` run beside
   * the first, its `/128` host routes to pod veths vouching as `/32`s do (kernel-parse.ts).
   */
  ipv6?: boolean;
}

/** Reads the node's pod wiring with iproute2. One instance per daemon; stateless between reads. */
export class KernelSource implements KernelReader {
  readonly description: string;
  private readonly ip: IpRunner;
  private readonly ipRunner: (() => IpRunner | undefined) | undefined;
  private readonly netnsPath: string | undefined;
  private readonly timeoutMs: number;
  private readonly ipv6: boolean;

  constructor(o: KernelSourceOptions = {}) {
    this.ip = createIpRunner(localSpawner, o.ipPath ? { ipPath: o.ipPath } : {});
    this.ipRunner = o.ipPath ? undefined : o.ipRunner;
    this.netnsPath = o.netnsPath;
    this.timeoutMs = Math.max(1, Math.min(o.timeoutMs ?? KERNEL_READ_TIMEOUT_MS, KERNEL_READ_TIMEOUT_MS));
    this.ipv6 = !!o.ipv6;
    this.description = o.netnsPath ? `the kernel (netns ${o.netnsPath})` : "the kernel (ipamd's netns)";
  }

  /**
   * Runs `ip -json -batch -` with {@link KERNEL_BATCH} on stdin (and, with `ipv6`, `ip -6 -json -batch -` with {@link KERNEL_V6_BATCH}) and parses them.
   * @returns the pod IPs the kernel shows wired (see kernel-parse.ts).
   * @throws KernelUnavailableError when the command cannot start, exits non-zero, times
   *   out, prints more than 32 MiB, or prints output that does not parse.
   */
  async readKernel(): Promise<KernelEvidence> {
    const [v4, v6] = await Promise.all([
      this.run(['-json'], KERNEL_BATCH),
      this.ipv6 ? this.run(['-6', '-json'], KERNEL_V6_BATCH) : undefined,
    ]);
    try {
      const k = parseKernelOutput(v4);
      return v6 === undefined ? k : addKernelV6Routes(k, v6);
    } catch (e) {
      throw new KernelUnavailableError(`${this.description} unreadable: ${(e as Error).message}`);
    }
  }

  /** One `ip <flags> -batch -` run of `batch`; @returns its stdout. @throws KernelUnavailableError as readKernel. */
  private async run(flags: string[], batch: string): Promise<string> {
    let r: IpRun;
    try {
      r = await (this.ipRunner?.() ?? this.ip).runIp(flags, batch.trim().split('\n'), this.netnsPath, true, {
        timeoutMs: this.timeoutMs,
        maxOutputBytes: MAX_OUTPUT_BYTES,
      });
    } catch (e) {
      throw new KernelUnavailableError(`${this.description} unreadable: ${(e as Error).message.slice(0, 200)}`);
    }
    if (r.code !== 0 || r.killed) {
      const why =
        r.killed === 'timeout'
          ? `timed out after ${this.timeoutMs} ms`
          : r.killed === 'output'
            ? `printed more than ${MAX_OUTPUT_BYTES} bytes`
            : r.stderr.trim().split('\n')[0] || `exited ${r.code}`;
      throw new KernelUnavailableError(`${this.description} unreadable: ${r.argv.join(' ')}: ${why.slice(0, 200)}`);
    }
    return r.stdout;
  }
}
