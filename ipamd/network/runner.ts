/**
 * The one way ipamd's host networking runs commands (`iptables*`, `sysctl`; `ip` through
 * the `ip` runner shared with the plugin, netfacts/ip-batch.ts): a spawned process,
 * stdin optional, bounded by a timeout. In production ipamd runs in the
 * node's network namespace and no netns is given; tests point the runner at a namespace
 * standing for the node (`nsenter --net=<path> <cmd>`, entered by path).
 */
import { spawn } from 'node:child_process';
import { LOCAL_IP, type IpRun } from '../../netfacts/ip-batch.js';

/** Directories appended to PATH (daemon sets may start ipamd with a minimal PATH). */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A command that exited non-zero (or was killed). `stderr` is the tool's own message. */
export class CommandError extends Error {
  constructor(
    readonly argv: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly stdout: string,
  ) {
    super(`${argv.join(' ')} exited ${exitCode ?? 'by signal'}: ${stderr.trim() || '(no message)'}`);
    this.name = 'CommandError';
  }
}

/** Output of a finished command. */
export interface CommandOutput {
  stdout: string;
  stderr: string;
}

/** Options of {@link CommandRunner}. */
export interface RunnerOptions {
  /**
   * Network namespace to run every command in, by path (`/var/run/netns/<name>` or
   * `/proc/<pid>/ns/net`). Unset in production: ipamd already runs in the node's netns.
   */
  netns?: string;
  /** Kill a command still running after this many ms (default 30 000). */
  timeoutMs?: number;
}

/** Runs commands, optionally inside one network namespace. Stateless; safe to share. */
export class CommandRunner {
  readonly netns: string | undefined;
  private readonly timeoutMs: number;

  constructor(o: RunnerOptions = {}) {
    this.netns = o.netns;
    this.timeoutMs = o.timeoutMs ?? 30_000;
  }

  /** The argv actually spawned for `cmd args` (with the `nsenter` prefix when a netns is set). */
  argv(cmd: string, args: string[]): string[] {
    return this.netns ? ['nsenter', `--net=${this.netns}`, cmd, ...args] : [cmd, ...args];
  }

  /**
   * Runs `cmd args`, writing `input` (if given) to its stdin.
   * @returns stdout and stderr as text.
   * @throws CommandError when it exits non-zero or runs longer than the timeout (killed
   *   with SIGKILL); Error when it cannot be spawned (e.g. ENOENT).
   */
  run(cmd: string, args: string[], input?: string): Promise<CommandOutput> {
    const argv = this.argv(cmd, args);
    const env = {
      ...process.env,
      PATH: `${process.env.PATH ? `${process.env.PATH}:` : ''}${SYSTEM_PATH}`,
      LC_ALL: 'C',
    };
    return new Promise((resolve, reject) => {
      const p = spawn(argv[0]!, argv.slice(1), {
        stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
        env,
      });
      let stdout = '';
      let stderr = '';
      const timer = setTimeout(() => {
        stderr += `\n(killed after ${this.timeoutMs} ms)`;
        p.kill('SIGKILL');
      }, this.timeoutMs);
      p.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      p.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      p.on('close', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve({ stdout, stderr });
        else reject(new CommandError(argv, code, stderr, stdout));
      });
      if (p.stdin) {
        p.stdin.on('error', () => undefined); // the tool may exit before reading; its exit code tells
        p.stdin.end(input);
      }
    });
  }

  /**
   * `ip -j <args>` parsed as JSON (an empty output is `[]`): leading `-` options are ip's
   * flags, the rest one listing command, run by the shared `ip` runner.
   * @throws CommandError, SyntaxError
   */
  async ipJson<T = unknown>(args: string[]): Promise<T[]> {
    const cmd = args.findIndex((a) => !a.startsWith('-'));
    const flags = cmd < 0 ? args : args.slice(0, cmd);
    const stdout = await this.ip(['-json', ...flags], [cmd < 0 ? '' : args.slice(cmd).join(' ')], true);
    return stdout.trim() ? (JSON.parse(stdout) as T[]) : [];
  }

  /** Runs `lines` with the shared `ip` runner in this runner's netns, within its timeout. @returns stdout. @throws CommandError */
  private async ip(flags: string[], lines: string[], wantStdout: boolean): Promise<string> {
    const r: IpRun = await LOCAL_IP.runIp(flags, lines, this.netns, wantStdout, { timeoutMs: this.timeoutMs });
    const stderr = r.killed ? `${r.stderr}\n(killed after ${this.timeoutMs} ms)` : r.stderr;
    if (r.code !== 0) throw new CommandError(r.argv, r.code, stderr, r.stdout);
    return r.stdout;
  }

  /**
   * Runs `lines` as one `ip -batch -` process (each line one `ip` command without the
   * leading `ip`; no quoting). Stops at the first failing line. No-op for no lines.
   * @throws CommandError with iproute2's message.
   */
  async ipBatch(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    await this.ip([], lines, false);
  }
}
