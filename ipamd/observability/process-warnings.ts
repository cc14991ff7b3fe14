/**
 * Process warnings (`process.emitWarning`: Node's deprecations, and e.g. the AWS SDK's
 * `NodeVersionSupportWarning`, which `@aws-sdk/client-ec2` emits once when ipamd creates its
 * EC2 client on a Node older than the SDK's next minimum) into ipamd's structured log, one
 * line each at `warn`. Node still prints them to stderr (its default); with
 * AWS_VPC_K8S_CNI_LOG_FILE set, as the chart sets it, the log file is where an operator
 * reads ipamd, and a warning printed only to stderr never reached it.
 */
import type { Logger } from 'pino';

/**
 * Logs each process warning from now on as `{ warning: <name>, code?, detail? }` with the
 * warning's message, at `warn`. Returns a function that stops doing so.
 */
export function logProcessWarnings(log: Logger): () => void {
  const onWarning = (w: Error & { code?: string; detail?: string }): void => {
    log.warn(
      { warning: w.name, ...(w.code ? { code: w.code } : {}), ...(w.detail ? { detail: w.detail } : {}) },
      // The SDK's message is several lines; one log line keeps them (JSON escapes the newlines).
      w.message,
    );
  };
  process.on('warning', onWarning);
  return () => void process.off('warning', onWarning);
}
