/**
 * One plugin invocation around the verb handlers: reads the CNI environment and stdin,
 * answers VERSION, validates the config, runs the handler, prints the result or the CNI
 * error object on stdout (CNI spec "Result"/"Error"), appends the log line, and returns
 * the exit code (0 success, 1 error).
 *
 * Runs in two hosts: the plugin process (cni-plugin/main.ts, I/O = the process's env,
 * fd 0, fd 1, fd 2) and ipamd's CNI exec server (ipamd/cni-exec), which runs many
 * invocations concurrently in one process. So everything an invocation reads or writes
 * goes through its {@link InvocationIo}; no module here keeps per-invocation state.
 */
import { readFileSync, writeSync } from 'node:fs';
import { readCniEnv, type CniEnv } from './env.js';
import { asCniError, clip, CniError, ECHO_MAX_CHARS } from './errors.js';
import { CNI_ERRORS, cniError } from './error-catalogue.js';
import { appendInvocationLog, type InvocationLog } from './log.js';
import type { PluginHost } from './host.js';
import type { NetConf } from './netconf.js';
import { versionResult } from './result.js';
import { isSupportedVersion, LATEST_VERSION } from './versions.js';

/** What a verb handler returns: the object to print (nothing for DEL) and the pod IP for the log. */
export interface VerbOutcome {
  output?: unknown;
  /** `output` already serialised (ADD serialises inside its rollback); printed as is. */
  outputJson?: string;
  ip?: string;
}

/** Where a verb runs, beyond the CNI environment. */
export interface VerbContext {
  /**
   * How to reach ipamd, run `ip`, and which netns is the node's (host.ts); default the
   * plugin process's host (`PROCESS_HOST`). ipamd's CNI exec server passes its own.
   */
  host?: PluginHost;
  /**
   * Stage trace of this invocation (ipamd's exec server passes one; the plugin process
   * none): called with a mark name (e.g. `veth-up`) when the invocation reaches it; the
   * caller timestamps it. Marks of ADD: cni-plugin/add.ts and wiring.ts.
   */
  trace?: (mark: string) => void;
}

/**
 * A verb handler; `warnings` collects non-fatal problems for the log line.
 * @throws CniError.
 */
export type VerbHandler = (env: CniEnv, conf: NetConf, warnings: string[], ctx: VerbContext) => Promise<VerbOutcome>;

/** I/O of an invocation: the process's env, fd 0, 1, 2 by default; ipamd's exec server passes its own. */
export interface InvocationIo {
  env: Readonly<Record<string, string | undefined>>;
  readStdin: () => string;
  writeStdout: (s: string) => void;
  /** Warnings (one line each); default fd 2. */
  writeStderr?: (s: string) => void;
  /** Default: the plugin process's host. */
  ctx?: VerbContext;
  /**
   * Writes the invocation log line (JSON + newline) to `file` instead of appending it
   * here: ipamd's exec server passes its rotating plugin log. Returns false to have it appended here.
   */
  appendLog?: (file: string, line: string) => boolean;
}

const defaultIo = (): InvocationIo => ({
  env: process.env,
  readStdin: () => readFileSync(0, 'utf8'),
  writeStdout: (s) => {
    writeSync(1, s);
  },
  writeStderr: (s) => {
    writeSync(2, s);
  },
});

/**
 * Runs one invocation with `handlers` keyed by CNI_COMMAND (VERSION is built in; any
 * verb without a handler is CNI error 4).
 * @returns the process exit code.
 */
export async function runInvocation(
  handlers: Record<string, VerbHandler>,
  io: InvocationIo = defaultIo(),
): Promise<number> {
  const t0 = performance.now();
  const verb = io.env.CNI_COMMAND ?? '';
  if (verb === 'VERSION') {
    io.writeStdout(JSON.stringify(versionResult()));
    return 0;
  }
  let cniVersion = LATEST_VERSION;
  let conf: NetConf | undefined;
  let env: CniEnv | undefined;
  const warnings: string[] = [];
  let ip: string | undefined;
  let error: CniError | undefined;
  try {
    // Loaded here, not at the top: VERSION never pays for zod.
    const { decodeConfig, validateConfig } = await import('./netconf.js');
    const raw = decodeConfig(io.readStdin());
    if (isSupportedVersion(raw.cniVersion)) cniVersion = raw.cniVersion;
    const logFile = typeof raw.logFile === 'string' && raw.logFile.startsWith('/') ? raw.logFile : undefined;
    if (logFile) conf = { logFile } as NetConf; // an invalid config still gets its log line
    conf = validateConfig(raw);
    env = readCniEnv(io.env);
    const handler = handlers[verb];
    if (!handler) {
      throw verb === ''
        ? cniError('env-no-command')
        : cniError('env-bad-command', `implemented: VERSION, ${Object.keys(handlers).join(', ')}`, {
            verb: clip(verb, ECHO_MAX_CHARS),
          });
    }
    io.ctx?.trace?.('parsed');
    const out = await handler(env, conf, warnings, io.ctx ?? {});
    ip = out.ip;
    if (out.outputJson !== undefined) io.writeStdout(out.outputJson);
    else if (out.output !== undefined) io.writeStdout(JSON.stringify(out.output));
  } catch (e) {
    error = asCniError(e, CNI_ERRORS.internal.code, CNI_ERRORS.internal.msg);
    io.writeStdout(JSON.stringify(error.toJSON(cniVersion)));
  }
  const stderr =
    io.writeStderr ??
    ((s: string) => {
      process.stderr.write(s);
    });
  if (conf?.logFile) {
    const entry: InvocationLog = {
      time: new Date().toISOString(),
      verb,
      containerId: env?.containerId ?? io.env.CNI_CONTAINERID ?? '',
      ifName: env?.ifName ?? io.env.CNI_IFNAME ?? '',
      netns: env?.netns ?? io.env.CNI_NETNS ?? '',
      ...(env?.args.podNamespace ? { podNamespace: env.args.podNamespace } : {}),
      ...(env?.args.podName ? { podName: env.args.podName } : {}),
      outcome: error ? 'error' : 'ok',
      ms: Math.round((performance.now() - t0) * 10) / 10,
      ...(error ? { code: error.code, msg: error.msg, details: error.details } : {}),
      ...(ip ? { ip } : {}),
      ...(warnings.length ? { warnings } : {}),
    };
    if (!io.appendLog?.(conf.logFile, `${JSON.stringify(entry)}\n`))
      await appendInvocationLog(conf.logFile, entry, stderr);
  }
  for (const w of warnings) stderr(`eni-ipam: ${w}\n`);
  return error ? 1 : 0;
}
