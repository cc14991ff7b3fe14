/**
 * How ipamd's process ends (docs/design.md#14-operability): SIGTERM or SIGINT always ends
 * it within its grace period, whatever it is doing (docs/design.md#bounds-on-bad-input).
 *
 * - During start-up nothing has been served: it stops at once (exit 0), as a kill would,
 *   which start-up survives by design (every write is atomic, the checkpoint directory
 *   lock dies with the process).
 * - Once serving, the daemon drains and flushes (`Daemon.stop`), then exits 0; if that has
 *   not finished after {@link SHUTDOWN_DEADLINE_MS} it exits 1 with one line saying so.
 * - The log is flushed for at most {@link LOG_FLUSH_MS}: a log writer that cannot write (a
 *   stdout pipe nobody reads, a file on a hung disk) is abandoned, never waited for — also
 *   at exit, where pino would otherwise write what it holds synchronously, forever.
 */
import type { Logger } from 'pino';
import type { RotatingFileStream } from 'rotating-file-stream';
import { stopWaitingForLogReader } from './log.js';
import { closeLog } from './observability/log-files.js';

/** Longest a shutdown may take before ipamd exits anyway (ms); below the chart's 30 s grace period. */
export const SHUTDOWN_DEADLINE_MS = 20_000;

/** Longest the log is given to reach its stream or file at exit (ms). */
export const LOG_FLUSH_MS = 2_000;

/** Resolves true when `p` settles within `ms`, false otherwise. */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Flushes `log` (and ends `file`, the rotating log file, when logging to one) for at most
 * `ms`. A writer that did not finish is abandoned: stdout lines a full pipe does not take
 * within `ms` are dropped (log.ts), so `process.exit` cannot block on them.
 * @returns true when the flush and the file's end were seen in time.
 */
export async function flushLogWithin(
  log: Logger,
  file: RotatingFileStream | undefined,
  ms = LOG_FLUSH_MS,
): Promise<boolean> {
  stopWaitingForLogReader(log, ms); // stdout: a pipe nobody reads is given `ms`, also at exit
  const flushed = new Promise<void>((resolve) => {
    try {
      log.flush(() => resolve());
    } catch {
      resolve(); // e.g. a destination not open yet
    }
  });
  return (await within(flushed, ms)) && (!file || (await within(closeLog(file), ms)));
}

/** What {@link installStopSignals} needs: the log, and the daemon's stop once it serves. */
export interface StopTarget {
  log: Logger;
  file: RotatingFileStream | undefined;
  /** The running daemon's stop, or undefined while it starts. */
  daemonStop(): (() => Promise<void>) | undefined;
  /** Ends the process (default process.exit). */
  exit?: (code: number) => never;
}

/**
 * Installs the SIGTERM/SIGINT handlers (see the module docstring). Idempotent per signal:
 * a second signal while stopping changes nothing (the deadline still holds).
 */
export function installStopSignals(t: StopTarget): void {
  const exit = t.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const end = async (code: number) => {
    await flushLogWithin(t.log, t.file);
    exit(code);
  };
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    const stop = t.daemonStop();
    if (!stop) {
      t.log.info({ signal: sig }, 'signal during start-up: exiting (nothing served yet)');
      void end(0);
      return;
    }
    setTimeout(() => {
      t.log.error({ signal: sig, deadlineMs: SHUTDOWN_DEADLINE_MS }, 'shutdown did not finish in time: exiting');
      process.stderr.write(`eni-ipamd: shutdown did not finish within ${SHUTDOWN_DEADLINE_MS / 1000} s: exiting\n`);
      void end(1);
    }, SHUTDOWN_DEADLINE_MS);
    t.log.info({ signal: sig }, 'shutting down: draining in-flight RPCs');
    stop().then(
      () => end(0),
      (e: Error) => {
        t.log.error({ err: e.message }, 'shutdown failed');
        return end(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
