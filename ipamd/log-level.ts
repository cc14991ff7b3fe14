/**
 * Changing ipamd's log level at run time without any TCP endpoint: each SIGUSR2 moves
 * to the next, more verbose level of the cycle `configured → … → debug → trace →
 * configured` (e.g. info → debug → trace → info), so `kill -USR2 <pid>` twice turns on
 * tracing and once more turns it back off. Every change is logged at `warn` with the old
 * and new level (visible unless AWS_VPC_K8S_CNI_LOGLEVEL is error or fatal).
 */
import type { Logger } from './log.js';

/** Levels from least to most verbose. */
const ORDER = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

/**
 * The level cycle starting at `configured`: it, then each more verbose level down to trace.
 * @throws Error for a level pino does not know.
 */
export function levelCycle(configured: string): string[] {
  const i = ORDER.indexOf(configured as (typeof ORDER)[number]);
  if (i < 0) throw new Error(`unknown log level "${configured}": expected one of ${ORDER.join(', ')}`);
  return ORDER.slice(i);
}

/** The level after `current` in the cycle of `configured` (wrapping to `configured`). */
export function nextLevel(configured: string, current: string): string {
  const cycle = levelCycle(configured);
  const i = cycle.indexOf(current);
  return cycle[(i + 1) % cycle.length]!;
}

/**
 * Installs the SIGUSR2 handler on `proc` (default `process`). @returns a function that
 * removes it.
 */
export function installLogLevelSignal(log: Logger, configured: string, proc: NodeJS.Process = process): () => void {
  levelCycle(configured);
  const onSignal = () => {
    const from = log.level;
    const to = nextLevel(configured, from);
    log.level = to;
    log.warn({ from, to, signal: 'SIGUSR2' }, 'log level changed');
  };
  proc.on('SIGUSR2', onSignal);
  return () => proc.off('SIGUSR2', onSignal);
}
