/**
 * The health probe's logic (CLI in ./probe.ts): argument parsing and one
 * `grpc.health.v1.Health/Check` call on ipamd's Unix socket. See probe.ts for the exit codes.
 */
import { parseArgs } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';

/** Exit codes of the probe (see the file's docstring). */
export const PROBE_EXIT = { serving: 0, notServing: 1, unreachable: 2, usage: 3 } as const;

/** What one probe saw: the exit code and the one-line reason. */
export interface ProbeOutcome {
  code: number;
  message: string;
}

/** Parsed probe arguments: socket path, health service name, deadline (ms). */
export interface ProbeOptions {
  socket: string;
  service: string;
  timeoutMs: number;
}

/**
 * Parses argv (without node and script) into {@link ProbeOptions}.
 * @throws Error naming the bad argument and what is accepted.
 */
export function parseProbeArgs(argv: string[]): ProbeOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: { socket: { type: 'string' }, service: { type: 'string' }, timeout: { type: 'string' } },
  });
  const socket = values.socket ?? '/var/run/eni-ipam/ipamd.sock';
  if (!socket.startsWith('/'))
    throw new Error(`--socket "${socket}" is invalid: expected an absolute path to ipamd's Unix socket`);
  const t = values.timeout ?? '5000';
  const timeoutMs = /^[0-9]+$/.test(t) ? Number(t) : NaN;
  if (!(timeoutMs >= 1 && timeoutMs <= 60_000))
    throw new Error(`--timeout "${t}" is invalid: expected a whole number of ms from 1 to 60000`);
  return { socket, service: values.service ?? '', timeoutMs };
}

/**
 * Asks ipamd's health service once. Never throws: every failure is an outcome.
 * @returns code 0 only when the answer is SERVING.
 */
export async function probeHealth(o: ProbeOptions): Promise<ProbeOutcome> {
  const Client = grpc.makeGenericClientConstructor(healthService, 'Health');
  const client = new Client(`unix://${o.socket}`, grpc.credentials.createInsecure());
  try {
    const reply = await new Promise<{ status?: string }>((resolve, reject) => {
      // waitForReady false: a missing or dead socket fails at once instead of waiting out the deadline.
      client.Check(
        { service: o.service },
        { deadline: Date.now() + o.timeoutMs },
        (err: grpc.ServiceError | null, r: { status?: string }) => (err ? reject(err) : resolve(r)),
      );
    });
    const status = reply.status ?? 'UNKNOWN';
    if (status === 'SERVING')
      return {
        code: PROBE_EXIT.serving,
        message: `ipamd health${o.service ? ` (${o.service})` : ''}: SERVING on ${o.socket}`,
      };
    return {
      code: PROBE_EXIT.notServing,
      message: `ipamd health${o.service ? ` (${o.service})` : ''}: ${status} on ${o.socket}`,
    };
  } catch (e) {
    const err = e as grpc.ServiceError;
    return {
      code: PROBE_EXIT.unreachable,
      message: `ipamd is not serving on ${o.socket}: ${grpc.status[err.code] ?? 'ERROR'}: ${(err.details || err.message).replace(/\s*Resolution note:\s*$/, '')}`,
    };
  } finally {
    client.close();
  }
}
