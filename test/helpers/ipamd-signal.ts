/**
 * The real ipamd binary as a bare child for signal tests: started with exactly the env given
 * (plus PATH and dummy AWS keys), its stdout either read (kept) or never read (a wedged log
 * reader), and ended by {@link BareIpamd.term}: SIGTERM, then the exit code, the time to
 * exit (ms) and the CPU it used after the signal, or SIGKILL after the deadline.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { IPAMD_PATH } from '../../kit/ipamd-process.js';

/** How a SIGTERM ended (or did not end) ipamd. */
export interface TermOutcome {
  /** Exit code; null when a signal ended it (`signal` says which). */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** From SIGTERM to exit (ms). */
  ms: number;
  /** True when it was still running at the deadline and SIGKILL ended it. */
  killed: boolean;
}

/** A bare ipamd child; see the module docstring. */
export interface BareIpamd {
  child: ChildProcess;
  /** stderr so far. */
  stderr(): string;
  /** stdout so far (empty when `readStdout` is false). */
  stdout(): string;
  /** CPU time used so far (ms, user + system), from /proc/<pid>/stat. */
  cpuMs(): number;
  /** Sends SIGTERM; resolves with the outcome (SIGKILL after `deadlineMs`). */
  term(deadlineMs: number): Promise<TermOutcome>;
}

/** Spawns ipamd with `env`; `readStdout: false` never reads its stdout pipe (it fills and stays full). */
export function spawnBareIpamd(env: NodeJS.ProcessEnv, o: { readStdout: boolean }): BareIpamd {
  const child = spawn(process.execPath, [IPAMD_PATH], {
    env: { PATH: process.env.PATH, AWS_ACCESS_KEY_ID: 'AKIDSIMULATED', AWS_SECRET_ACCESS_KEY: 'simulated', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  if (o.readStdout) child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-200_000)));
  else child.stdout!.pause();
  child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-20_000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const ticks = (): number => {
    const f = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // USER_HZ 100
  };
  return {
    child,
    stderr: () => err,
    stdout: () => out,
    cpuMs: ticks,
    async term(deadlineMs) {
      const t0 = performance.now();
      child.kill('SIGTERM');
      let killed = false;
      const timer = setTimeout(() => {
        killed = true;
        child.kill('SIGKILL');
      }, deadlineMs);
      const r = await exited;
      clearTimeout(timer);
      return { ...r, ms: performance.now() - t0, killed };
    },
  };
}
