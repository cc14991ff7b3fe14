#!/usr/bin/env node
/**
 * eni-ipamd: the per-node IP address manager daemon. Composition root only: validates
 * the environment (a bad variable stops start-up with one line naming it), starts the
 * daemon, and on SIGTERM/SIGINT stops taking new work, finishes in-flight RPCs, flushes
 * the checkpoint and exits 0. SIGUSR2 cycles the log level (see log-level.ts).
 */
import { checkConfigOnDisk, ConfigError, loadConfig } from './config.js';
import { startDaemon } from './daemon.js';
import { createLogger } from './log.js';
import { installLogLevelSignal } from './log-level.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
    checkConfigOnDisk(config);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`eni-ipamd: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  installLogLevelSignal(log, config.logLevel); // SIGUSR2: next more verbose level, wrapping (log-level.ts)
  let daemon;
  try {
    daemon = await startDaemon(config, log);
  } catch (e) {
    log.fatal({ err: (e as Error).message }, 'ipamd could not start');
    log.flush();
    process.stderr.write(`eni-ipamd: ${(e as Error).message}\n`);
    process.exit(1);
  }
  let stopping = false;
  const onSignal = (sig: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: sig }, 'shutting down: draining in-flight RPCs');
    daemon.stop().then(
      () => { log.flush(); process.exit(0); },
      (e: Error) => { log.error({ err: e.message }, 'shutdown failed'); log.flush(); process.exit(1); },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

void main();
