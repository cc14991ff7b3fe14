/**
 * eni-ipamd's composition root: validates the environment, every path setting included (a
 * bad or refused variable stops start-up with one line naming it); takes the node
 * (startup/take-node.ts: its owner record and one-ipamd guards) before anything on the node
 * is opened; logs its version, the Node version and every effective setting once, then one
 * warning per ignored one; stands by while aws-node runs on the node
 * (startup/aws-node-wait.ts); starts the daemon, and on SIGTERM/SIGINT stops taking new
 * work, finishes in-flight RPCs, flushes the checkpoint and exits 0, within a deadline
 * whatever it is doing (shutdown.ts). SIGUSR2 cycles the log level (see log-level.ts).
 * main.ts runs it, from the one-file bundle when the build made one
 * (scripts/bundle-ipamd.mjs), else from these modules.
 */
import path from 'node:path';
import type { CodeCacheState } from '../loader/code-cache.js';
import { assertCanWriteDirSync } from '../nodefs/dirs.js';
import {
  checkConfigOnDisk,
  ConfigError,
  effectiveSettings,
  loadConfigReport,
  startErrorMessage,
  type ConfigReport,
} from './config.js';
import { checkCustomConflist } from './startup/cni-install-report.js';
import { startDaemon } from './daemon.js';
import { createLogger } from './log.js';
import { installLogLevelSignal } from './log-level.js';
import { openRotatingLog } from './observability/log-files.js';
import { logProcessWarnings } from './observability/process-warnings.js';
import { flushLogWithin, installStopSignals } from './shutdown.js';
import { takeNode } from './startup/take-node.js';
import { waitUntilAwsNodeGone } from './startup/aws-node-wait.js';
import { buildInfo } from './version.js';

/** How ipamd's modules were loaded this run (bundle-loader.ts; logged at start-up). */
export interface ModulesLoaded {
  /** `bundle`: the one-file bundle; `modules`: the ES modules tsc wrote (no bundle built). */
  from: 'bundle' | 'modules';
  /** The bundle's V8 code cache: 'accepted', 'missing', 'rejected' (other V8 or flags), 'off' for modules. */
  codeCache: CodeCacheState;
  /** The cache file this run looked for (bundle only). */
  codeCacheFile?: string;
}

/**
 * Runs ipamd until a signal ends the process. Exits the process itself: 1 (with the reason
 * on stderr) when the environment is invalid, another ipamd runs on the node, or start-up
 * fails; 0 after a clean shutdown (or a signal during start-up).
 * `loaded` says how main.ts loaded it (one info line).
 * @returns once the daemon is serving and the signal handlers are installed.
 */
export async function runIpamd(loaded?: ModulesLoaded): Promise<void> {
  let report: ConfigReport;
  try {
    report = loadConfigReport(process.env);
    checkConfigOnDisk(report.config);
    checkCustomConflist(report.config);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`eni-ipamd: ${e.message}\n`);
      process.exit(1);
    }
    throw e;
  }
  const config = report.config;
  let checkpointLock;
  // Taking the node waits on IMDS (and may stand by): a signal then ends ipamd at once, exit 0.
  const startLog = createLogger({ level: config.logLevel, format: config.logFormat });
  const endWhileTaking = (sig: NodeJS.Signals) => {
    startLog.info({ signal: sig }, 'signal during start-up: exiting (nothing served yet, the node not taken)');
    void flushLogWithin(startLog, undefined).then(() => process.exit(0));
  };
  process.on('SIGTERM', endWhileTaking).on('SIGINT', endWhileTaking);
  try {
    // The state directory first (nothing written): a read-only one fails now, not after IMDS answers.
    assertCanWriteDirSync(path.dirname(config.checkpointPath));
    // Before the log file: standing aside, a DaemonSet's ipamd says so on stdout (its container log).
    checkpointLock = await takeNode(config, startLog);
  } catch (e) {
    process.stderr.write(`eni-ipamd: ${startErrorMessage(e, config)}\n`);
    process.exit(1);
  }
  process.off('SIGTERM', endWhileTaking).off('SIGINT', endWhileTaking);
  // AWS_VPC_K8S_CNI_LOG_FILE: a rotating file (observability/log-files.ts) or stdout.
  let file;
  try {
    file =
      config.logFile === 'stdout'
        ? undefined
        : openRotatingLog(config.logFile, { maxSize: config.logFileMaxSize, maxFiles: config.logFileMaxFiles });
  } catch (e) {
    process.stderr.write(
      `eni-ipamd: AWS_VPC_K8S_CNI_LOG_FILE=${JSON.stringify(config.logFile)}: ${(e as Error).message}\n`,
    );
    process.exit(1);
  }
  if (file)
    process.stdout.write(
      `eni-ipamd: logging to ${config.logFile} (rotated at ${config.logFileMaxSize}, ${config.logFileMaxFiles} kept)\n`,
    );
  const log = createLogger({ level: config.logLevel, format: config.logFormat, ...(file ? { stream: file } : {}) });
  // Once at start: what runs and every setting in force, with where it came from
  // (docs/configuration.md); then one warning per setting eni-ipam ignores.
  const build = buildInfo();
  log.info(
    { version: build.version, node: build.node, settings: effectiveSettings(report) },
    `eni-ipamd ${build.version} (Node.js ${build.node}) starting`,
  );
  for (const w of report.warnings) log.warn({ setting: w.slice(0, w.indexOf('=')) }, w);
  if (loaded)
    log.info(
      { modules: loaded.from, codeCache: loaded.codeCache, codeCacheFile: loaded.codeCacheFile },
      'ipamd modules loaded',
    );
  logProcessWarnings(log); // e.g. the AWS SDK's Node version notice, into the log file too (not only stderr)
  installLogLevelSignal(log, config.logLevel); // SIGUSR2: next more verbose level, wrapping (log-level.ts)
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  // From here SIGTERM always ends ipamd: at once while starting, after a bounded drain once serving.
  installStopSignals({ log, file, daemonStop: () => (daemon ? () => daemon!.stop() : undefined) });
  try {
    // Never beside a live aws-node: stand by until it is gone (startup/aws-node-wait.ts).
    await waitUntilAwsNodeGone(config, log);
    daemon = await startDaemon(config, log, { checkpointLock });
  } catch (e) {
    const why = startErrorMessage(e, config); // a path error names its variable
    log.fatal({ err: why }, 'ipamd could not start');
    await flushLogWithin(log, file);
    process.stderr.write(`eni-ipamd: ${why}\n`);
    process.exit(1);
  }
}
