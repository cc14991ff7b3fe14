/**
 * Runs iproute2 command batches (`ip -batch -`, commands on stdin, one process per
 * batch), optionally inside another network namespace entered by path with
 * `nsenter --net=<path>` (never by a PID parsed out of the path). The one place that
 * spawns `ip` for the plugin (ip-query.ts builds on {@link runIp}).
 *
 * The child's environment is fixed at module load (PATH plus the system dirs, `LC_ALL=C`
 * so iproute2's messages are the English ones the callers match): nothing here reads the
 * invocation's or the host process's environment per call, so the same code runs in the
 * plugin process and inside ipamd (ipamd/cni-exec).
 */
import { spawn } from 'node:child_process';

/** Directories appended to PATH for `ip` and `nsenter` (runtimes may pass a minimal PATH). */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Environment of every `ip`/`nsenter` child (read once; immutable). */
const IP_ENV: NodeJS.ProcessEnv = Object.freeze({ PATH: process.env.PATH ? `${process.env.PATH}:${SYSTEM_PATH}` : SYSTEM_PATH, LC_ALL: 'C' });

/** A failed `ip` batch: `stderr` is iproute2's message (e.g. "RTNETLINK answers: File exists"). */
export class IpBatchError extends Error {
  constructor(readonly argv: string[], readonly exitCode: number | null, readonly stderr: string) {
    super(`${argv.join(' ')} exited ${exitCode}: ${stderr.trim() || '(no message)'}`);
    this.name = 'IpBatchError';
  }
}

/** Outcome of one `ip` process. */
export interface IpRun { argv: string[]; code: number | null; stdout: string; stderr: string }

/**
 * Runs `ip <flags> -batch -` with `lines` on stdin, inside the netns at `netnsPath` when
 * given (`nsenter --net=<path>`). Stdout is collected only when `wantStdout`.
 * @throws Error when the process cannot be spawned (a non-zero exit is in the result).
 */
export function runIp(flags: string[], lines: string[], netnsPath?: string, wantStdout = false): Promise<IpRun> {
  const argv = netnsPath ? ['nsenter', `--net=${netnsPath}`, 'ip', ...flags, '-batch', '-'] : ['ip', ...flags, '-batch', '-'];
  return new Promise((resolve, reject) => {
    const p = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', wantStdout ? 'pipe' : 'ignore', 'pipe'], env: IP_ENV });
    let stdout = '';
    let stderr = '';
    p.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ argv, code, stdout, stderr }));
    p.stdin!.on('error', () => undefined); // ip may exit before reading everything
    p.stdin!.end(`${lines.join('\n')}\n`);
  });
}

/**
 * Runs `lines` as one `ip -batch -` process; inside the netns at `netnsPath` when given.
 * Each line is one `ip` command without the leading `ip` (e.g. `link set dev lo up`);
 * arguments must not contain whitespace or quotes. The batch stops at the first failing
 * command (earlier commands stay applied).
 * @throws IpBatchError when ip exits non-zero; Error when it cannot be spawned.
 */
export async function ipBatch(lines: string[], netnsPath?: string): Promise<void> {
  const r = await runIp([], lines, netnsPath);
  if (r.code !== 0) throw new IpBatchError(r.argv, r.code, r.stderr);
}
