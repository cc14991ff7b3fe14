#!/usr/bin/env node
/**
 * eni-ipam health probe: the command the DaemonSet's readiness and liveness probes run
 * inside the ipamd container (`node /app/dist/ipamd/probe.js --socket <path>`). It calls
 * `grpc.health.v1.Health/Check` (the standard gRPC health protocol,
 * https://github.com/grpc/grpc/blob/master/doc/health-checking.md) on ipamd's Unix
 * socket and exits:
 *   0  the service answered SERVING;
 *   1  it answered another status (NOT_SERVING while starting or draining, UNKNOWN);
 *   2  no answer: no socket, a socket nobody listens on (left by a crash), or no reply
 *      within the timeout;
 *   3  bad arguments (the message names the argument and what is accepted).
 * One line on stdout (SERVING) or stderr (everything else) says why, so `kubectl
 * describe pod` shows it in the probe's failure event. A socket file alone proves
 * nothing: only a daemon that answers the RPC counts.
 *
 * Arguments: `--socket PATH` (default /var/run/eni-ipam/ipamd.sock), `--service NAME`
 * (default "": the whole server; `eniipam.v1.CNIBackend` asks for the CNI service
 * alone), `--timeout MS` (whole-call deadline in ms, default 5000, 1..60000).
 */
import { parseProbeArgs, probeHealth, PROBE_EXIT, type ProbeOptions } from './health-probe.js';

async function main(): Promise<void> {
  let opts: ProbeOptions;
  try {
    opts = parseProbeArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`eni-ipam-probe: ${(e as Error).message}\n`);
    process.exit(PROBE_EXIT.usage);
  }
  const out = await probeHealth(opts);
  (out.code === 0 ? process.stdout : process.stderr).write(`${out.message}\n`);
  process.exit(out.code);
}

void main();
