/**
 * Logging for ipamd: pino, JSON lines on stdout by default (one object per event,
 * `level` as a label, `time` as ISO 8601), or pino-pretty's human-readable lines for
 * demos and laptops (`ENI_IPAM_LOG_FORMAT=pretty`).
 */
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

/** Creates the daemon logger writing to file descriptor `fd` (default 1, stdout). */
export function createLogger(p: { level: string; format: 'json' | 'pretty'; fd?: number }): Logger {
  const fd = p.fd ?? 1;
  const opts = {
    level: p.level,
    base: { component: 'ipamd' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (p.format === 'pretty') return pino(opts, pretty({ destination: fd, colorize: false, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,component' }));
  return pino({ ...opts, formatters: { level: (label: string) => ({ level: label }) } }, pino.destination({ fd, sync: false }));
}
