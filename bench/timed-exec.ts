/**
 * Times one child process the way the CNI benchmarks need it, from inside bash, so
 * neither bash's own start nor an `nsenter` into the node netns is counted: the wall
 * time from `$EPOCHREALTIME` (µs) read just before and just after the command, and the
 * CPU time (user + sys of it and its children) from the `time` keyword (1 ms resolution). Used for our plugin and Debian's Go plugins alike (same method, same run).
 * NODE_EXTRA_CA_CERTS is always removed from the child's environment.
 */
import { spawn } from 'node:child_process';
import { quantile } from './stats.js';

/** One timed run: exit code, output, wall time (µs resolution) and CPU time (1 ms resolution), in ms. */
export interface TimedRun {
  code: number;
  stdout: string;
  stderr: string;
  wallMs: number;
  cpuMs: number;
  /** `$EPOCHREALTIME` just before and just after the command, µs since the epoch (CLOCK_REALTIME). */
  startUs: number;
  endUs: number;
}

/** Options of {@link timedExec}. */
export interface TimedExecOptions {
  /** Environment added to this process's (NODE_EXTRA_CA_CERTS removed). */
  env?: NodeJS.ProcessEnv;
  /** Written to the child's stdin (then closed). */
  input?: string;
  /** Run inside this network namespace (path, entered with `nsenter --net` before timing starts). */
  netns?: string;
}

const SCRIPT =
  'TIMEFORMAT="%3U %3S"; s=$EPOCHREALTIME; { time "$@" 2>&4 ; } 4>&2 2>&3; rc=$?; e=$EPOCHREALTIME; echo "wall $s $e" >&3; exit $rc';

/**
 * Runs `argv` and times it.
 * @throws Error when bash/nsenter cannot be spawned or the timing line is missing.
 */
export function timedExec(argv: string[], o: TimedExecOptions = {}): Promise<TimedRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, ...o.env };
  delete env.NODE_EXTRA_CA_CERTS;
  const bash = ['bash', '-c', SCRIPT, 'bash', ...argv];
  const full = o.netns ? ['nsenter', `--net=${o.netns}`, ...bash] : bash;
  return new Promise((resolve, reject) => {
    const p = spawn(full[0]!, full.slice(1), { env, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timing = '';
    p.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    (p.stdio[3] as NodeJS.ReadableStream).on('data', (d: Buffer) => (timing += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      const cpu = /^(\d+\.\d+) (\d+\.\d+)$/m.exec(timing);
      const wall = /^wall (\d+)[.,](\d{6}) (\d+)[.,](\d{6})$/m.exec(timing);
      if (!cpu || !wall) return reject(new Error(`no timing from bash for ${argv.join(' ')}: ${timing || stderr}`));
      const us = (sec: string, frac: string) => BigInt(sec) * 1_000_000n + BigInt(frac);
      const startUs = us(wall[1]!, wall[2]!);
      const endUs = us(wall[3]!, wall[4]!);
      resolve({
        code: code ?? -1,
        stdout,
        stderr,
        wallMs: Number(endUs - startUs) / 1000,
        cpuMs: (Number(cpu[1]) + Number(cpu[2])) * 1000,
        startUs: Number(startUs),
        endUs: Number(endUs),
      });
    });
    p.stdin!.on('error', () => undefined); // the command may exit before reading stdin
    p.stdin!.end(o.input ?? '');
  });
}

/** Median and p90 (ms) of a sample, as printed in the tables. */
export interface Summary {
  n: number;
  median: number;
  p90: number;
}

/** {@link Summary} of `xs` (ms). */
export function summarize(xs: readonly number[]): Summary {
  return { n: xs.length, median: quantile(xs, 0.5), p90: quantile(xs, 0.9) };
}

/** `12.3` — one decimal. */
export const ms = (x: number): string => x.toFixed(1);
