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
  return pino(
    { ...opts, formatters: { level: (label: string) => ({ level: label }) } },
    p.stream ? new LineBatcher(p.stream) : pino.destination({ fd, sync: false }),
  );
}
