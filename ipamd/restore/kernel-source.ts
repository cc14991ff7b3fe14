/**
 * The node's kernel as restore evidence (docs/design.md#4-restore-after-restart rule 5), the I/O half: one
 * `ip -json -batch -` process per evidence pass (routes of the main table, veths, ip
 * rules; kernel-parse.ts decides what they vouch for). It runs in ipamd's own network
 * namespace, or in `netnsPath` (ENI_IPAM_CNI_EXEC_NETNS, where the plugin wires the node
 * side when ipamd runs outside the node's namespace) through `nsenter --net=`.
 *
 * The read is all-or-nothing: a command that fails, times out or prints what does not
 * parse throws {@link KernelUnavailableError}; the caller counts the kernel as unreadable
 * and freezes releases, never as "no pods".
 */
import { execFile } from 'node:child_process';
import { KERNEL_BATCH, parseKernelOutput, type KernelEvidence } from './kernel-parse.js';

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
}

/** Reads the node's pod wiring with iproute2. One instance per daemon; stateless between reads. */
export class KernelSource implements KernelReader {
  readonly description: string;
  private readonly file: string;
  private readonly args: string[];
  private readonly timeoutMs: number;

  constructor(o: KernelSourceOptions = {}) {
    const ip = o.ipPath ?? 'ip';
    const ipArgs = ['-json', '-batch', '-'];
    this.file = o.netnsPath ? 'nsenter' : ip;
    this.args = o.netnsPath ? [`--net=${o.netnsPath}`, ip, ...ipArgs] : ipArgs;
    this.timeoutMs = Math.max(1, Math.min(o.timeoutMs ?? KERNEL_READ_TIMEOUT_MS, KERNEL_READ_TIMEOUT_MS));
    this.description = o.netnsPath ? `the kernel (netns ${o.netnsPath})` : "the kernel (ipamd's netns)";
  }

  /**
   * Runs `ip -json -batch -` with {@link KERNEL_BATCH} on stdin and parses it.
   * @returns the pod IPs the kernel shows wired (see kernel-parse.ts).
   * @throws KernelUnavailableError when the command cannot start, exits non-zero, times
   *   out, prints more than 32 MiB, or prints output that does not parse.
   */
  async readKernel(): Promise<KernelEvidence> {
    const stdout = await new Promise<string>((resolve, reject) => {
      const child = execFile(this.file, this.args, { timeout: this.timeoutMs, maxBuffer: MAX_OUTPUT_BYTES, encoding: 'utf8', killSignal: 'SIGKILL' }, (err, out, errOut) => {
        if (err) {
          const why = (err as NodeJS.ErrnoException & { killed?: boolean }).killed ? `timed out after ${this.timeoutMs} ms` : (errOut.trim().split('\n')[0] || err.message);
          reject(new KernelUnavailableError(`${this.description} unreadable: ${[this.file, ...this.args].join(' ')}: ${why.slice(0, 200)}`));
        } else resolve(out);
      });
      child.stdin?.on('error', () => undefined); // the child may exit before reading stdin; the exit code tells
      child.stdin?.end(KERNEL_BATCH);
    });
    try {
      return parseKernelOutput(stdout);
    } catch (e) {
      throw new KernelUnavailableError(`${this.description} unreadable: ${(e as Error).message}`);
    }
  }
}
