/**
 * Runs iproute2 command batches (`ip -batch -`, commands on stdin, one process per
 * batch), optionally inside another network namespace entered by path with
 * `nsenter --net=<path>` (never by a PID parsed out of the path).
 */
import { spawn } from 'node:child_process';

/** Directories appended to PATH for `ip` and `nsenter` (runtimes may pass a minimal PATH). */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A failed `ip` batch: `stderr` is iproute2's message (e.g. "RTNETLINK answers: File exists"). */
export class IpBatchError extends Error {
  constructor(readonly argv: string[], readonly exitCode: number | null, readonly stderr: string) {
    super(`${argv.join(' ')} exited ${exitCode}: ${stderr.trim() || '(no message)'}`);
    this.name = 'IpBatchError';
  }
}

/**
 * Runs `lines` as one `ip -batch -` process; inside the netns at `netnsPath` when given.
 * Each line is one `ip` command without the leading `ip` (e.g. `link set dev lo up`);
 * arguments must not contain whitespace or quotes. The batch stops at the first failing
 * command (earlier commands stay applied).
 * @throws IpBatchError when ip exits non-zero; Error when it cannot be spawned.
 */
export function ipBatch(lines: string[], netnsPath?: string): Promise<void> {
  const argv = netnsPath ? ['nsenter', `--net=${netnsPath}`, 'ip', '-batch', '-'] : ['ip', '-batch', '-'];
  return new Promise((resolve, reject) => {
    const env = { ...process.env, PATH: `${process.env.PATH ? `${process.env.PATH}:` : ''}${SYSTEM_PATH}` };
    const p = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'ignore', 'pipe'], env });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve() : reject(new IpBatchError(argv, code, stderr))));
    p.stdin.on('error', () => undefined); // ip may exit before reading everything
    p.stdin.end(`${lines.join('\n')}\n`);
  });
}
