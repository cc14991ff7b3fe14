/**
 * The global options every command takes, with ipamd's own defaults and environment
 * variables (ipamd/config-fields.ts), so the CLI run in the aws-node/eni-ipam container
 * of the DaemonSet needs no flag, and a demo or test points it elsewhere.
 */
import { CliError, EXIT } from './errors.js';

/** Output format: human tables (`wide`: more columns or rows), or one JSON or YAML document. */
export type OutputFormat = 'table' | 'wide' | 'json' | 'yaml';

/** The values `--output` accepts. */
export const OUTPUT_FORMATS: readonly OutputFormat[] = ['table', 'wide', 'json', 'yaml'];

/** Parsed global options. Times in ms. */
export interface GlobalOptions {
  /** Base URL of ipamd's introspection endpoint, e.g. `http://127.0.0.1:61679`. */
  introspection: string;
  /** Base URL of ipamd's metrics endpoint. */
  metrics: string;
  /** ipamd's gRPC Unix socket. */
  socket: string;
  /** ipamd's checkpoint file. */
  checkpoint: string;
  /** CRI socket (`unix:///path` or `/path`); undefined = auto-detect as ipamd does. */
  criEndpoint?: string;
  /** Network namespace (path) holding the node's pod wiring; undefined = the CLI's own. */
  netns?: string;
  /** Deadline of each read, ms. */
  timeoutMs: number;
  output: OutputFormat;
}

/**
 * Turns `host:port`, `:port` or a URL into a base URL (`:61678` → `http://127.0.0.1:61678`).
 * @throws CliError (usage) naming `flag` for anything else.
 */
export function baseUrl(flag: string, v: string): string {
  if (/^https?:\/\//.test(v)) return v.replace(/\/+$/, '');
  const m = /^(.*):(\d{1,5})$/.exec(v);
  if (!m || Number(m[2]) > 65535)
    throw new CliError(
      `--${flag} "${v}" is invalid: expected host:port (e.g. 127.0.0.1:61679) or an http:// URL`,
      EXIT.usage,
    );
  const host = m[1] === '' || m[1] === '0.0.0.0' ? '127.0.0.1' : m[1]!.replace(/^\[|\]$/g, '');
  return `http://${host.includes(':') ? `[${host}]` : host}:${m[2]}`;
}

/** Defaults from the environment, falling back to ipamd's defaults. */
export function envDefaults(env: NodeJS.ProcessEnv = process.env) {
  return {
    introspection: env.INTROSPECTION_BIND_ADDRESS || '127.0.0.1:61679',
    metrics: env.METRICS_BIND_ADDRESS || ':61678',
    socket: env.ENI_IPAM_SOCKET || '/var/run/eni-ipam/ipamd.sock',
    checkpoint: env.ENI_IPAM_CHECKPOINT_PATH || '/var/run/eni-ipam/ipam.json',
    criEndpoint: env.CRI_RUNTIME_ENDPOINT || undefined,
    netns: env.ENI_IPAM_CNI_EXEC_NETNS || undefined,
  };
}

/** Builds {@link GlobalOptions} from yargs' parsed argv. @throws CliError (usage) for a bad value. */
export function globalOptions(a: Record<string, unknown>): GlobalOptions {
  const timeoutMs = /^[0-9]+$/.test(String(a.timeout)) ? Number(a.timeout) : NaN;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000)
    throw new CliError(
      `--timeout "${String(a.timeout)}" is invalid: expected a whole number of ms from 1 to 60000`,
      EXIT.usage,
    );
  for (const f of ['socket', 'checkpoint'] as const) {
    if (!String(a[f]).startsWith('/'))
      throw new CliError(`--${f} "${String(a[f])}" is invalid: expected an absolute path`, EXIT.usage);
  }
  return {
    introspection: baseUrl('introspection', String(a.introspection)),
    metrics: baseUrl('metrics', String(a.metrics)),
    socket: String(a.socket),
    checkpoint: String(a.checkpoint),
    ...(a['cri-endpoint'] ? { criEndpoint: String(a['cri-endpoint']) } : {}),
    ...(a.netns ? { netns: String(a.netns) } : {}),
    timeoutMs,
    output: OUTPUT_FORMATS.includes(a.output as OutputFormat) ? (a.output as OutputFormat) : 'table',
  };
}
