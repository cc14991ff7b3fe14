/**
 * Logging for ipamd: pino, JSON lines on stdout by default (one object per event,
 * `level` as a label, `time` as ISO 8601), or pino-pretty's human-readable lines for
 * demos and laptops (`ENI_IPAM_LOG_FORMAT=pretty`). With AWS_VPC_K8S_CNI_LOG_FILE set to a
 * path, main.ts passes a rotating file stream (observability/log-files.ts) as `stream`; JSON
 * lines reach it in batches (observability/log-batch.ts: one write per batch, not per line).
 */
import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import { LineBatcher } from './observability/log-batch.js';

export type { Logger };

/** Per logger: sets the time after which its stdout writer stops waiting for a full pipe (see {@link stopWaitingForLogReader}). */
const GIVE_UP = new WeakMap<Logger, (ms: number) => void>();

/**
 * pino's asynchronous stdout destination, bounded: a pipe nobody reads (EAGAIN) is retried
 * every 100 ms as pino does, but only until the deadline set by {@link stopWaitingForLogReader};
 * after it, the lines held are abandoned, also by the synchronous flush pino runs at
 * process exit (which would otherwise wait for a reader forever).
 */
function boundedStdout(fd: number): { dest: ReturnType<typeof pino.destination>; giveUpIn: (ms: number) => void } {
  let giveUpAt = Infinity;
  const waiting = () => performance.now() < giveUpAt;
  const dest = pino.destination({ fd, sync: false, retryEAGAIN: waiting });
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => {
    try {
      flushSync();
    } catch (e) {
      if (waiting()) throw e;
    }
  };
  dest.on('error', (e: Error) => {
    if (waiting()) throw e; // as before: an unexpected stdout error ends ipamd
  });
  return { dest, giveUpIn: (ms) => (giveUpAt = performance.now() + ms) };
}

/**
 * From `ms` ms on, `log`'s stdout writer drops what a full pipe does not take instead of
 * waiting for a reader (shutdown: the container runtime's log reader may be gone or stuck).
 * No-op for a logger writing to a stream (log file) or in pretty format.
 */
export function stopWaitingForLogReader(log: Logger, ms: number): void {
  GIVE_UP.get(log)?.(ms);
}

/**
 * Creates the daemon logger writing to `stream` when given (JSON lines batched, see the
 * module docstring; `logger.flush()` hands the held ones over before the stream is ended),
 * else to file descriptor `fd` (default 1, stdout).
 */
export function createLogger(p: {
  level: string;
  format: 'json' | 'pretty';
  fd?: number;
  stream?: NodeJS.WritableStream;
}): Logger {
  const fd = p.fd ?? 1;
  const opts = {
    level: p.level,
    base: { component: 'ipamd' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (p.format === 'pretty') {
    // Loaded only for this format (~50 ms of start-up otherwise spent on every JSON-logging start).
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
    return pino(
      opts,
      pretty({
        destination: p.stream ?? fd,
        colorize: false,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname,component',
      }),
    );
  }
  const json = { ...opts, formatters: { level: (label: string) => ({ level: label }) } };
  if (p.stream) return pino(json, new LineBatcher(p.stream));
  const out = boundedStdout(fd);
  const log = pino(json, out.dest);
  GIVE_UP.set(log, out.giveUpIn);
  return log;
}
