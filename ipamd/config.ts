/**
 * ipamd configuration: environment variables → typed, validated {@link IpamdConfig}
 * (docs/design.md#env-vars; AWS-compatible names where amazon-vpc-cni-k8s has the concept).
 * A bad value throws {@link ConfigError} with one line naming the variable, the value and
 * what it accepts (the same phrase the chart's schema says: config-chart-types.ts). Durations are stored in ms.
 *
 * Every variable, its default and meaning: docs/configuration.md, generated from the spec
 * (NODE_VARS, TIMING_VARS, NEIGHBOUR_VARS) by scripts/config-reference.mjs. The aws-node variables eni-ipam
 * does not honour are checked by aws-node-check.ts: refused ones throw, warned ones are
 * returned by {@link loadConfigReport} for ipamd to log.
 *
 * Durations: a plain number is seconds (fractions allowed), or a number with unit ms, s, m, h;
 * at most 596h (Node's timer limit).
 * Booleans: strconv.ParseBool's spellings (1, t, T, TRUE, true, True, 0, f, F, FALSE, false,
 * False), true and false in any case. Blank (empty or blanks only) is unset.
 */
import { checkAwsNodeVars } from './aws-node-check.js';
import { AWS_NODE_VARS } from './aws-node-vars.js';
import { modeHints, nameHints } from './config-hints.js';
import { socketPathTooLong } from './config-path-fields.js';
import { ipFamilyOf } from './config-family.js';
import { checkPathSettings, pathSettingOfError } from './config-paths.js';
import { isBlank } from './config-patterns.js';
import { type VarSpec } from './config-spec.js';
import { ConfigError, quoteValue as quote, type IpamdConfig } from './config-types.js';
import { NODE_VARS } from './config-vars-node.js';
import { TIMING_VARS } from './config-vars-timing.js';
import { NEIGHBOUR_VARS } from './config-vars-neighbours.js';

export { ConfigError, type IpamdConfig } from './config-types.js';

/** Every variable, in documentation order. */
const SPECS: VarSpec[] = [...NODE_VARS, ...TIMING_VARS, ...NEIGHBOUR_VARS];

/** Every name ipamd reads: the spec and the aws-node table (config-hints.ts offers them for look-alikes). */
const KNOWN_NAMES = [...SPECS.map((s) => s.name), ...AWS_NODE_VARS.map((r) => r.name)];

function parseVar(spec: VarSpec, raw: string | undefined): unknown {
  const given = raw === undefined || isBlank(raw) ? undefined : raw;
  const input = given ?? spec.def;
  if (input === undefined) return undefined;
  const r = spec.field.safeParse(input);
  if (r.success) return r.data;
  const why = r.error.issues[0]?.message ?? 'invalid value';
  throw new ConfigError(spec.name, `${spec.name}=${quote(input)} is invalid: ${why.replace(/\s*\n\s*/g, ' ')}`);
}

/** Where an effective setting came from: its default, the environment, or the Helm chart (ENI_IPAM_CHART_ENV names it). */
export type SettingSource = 'default' | 'env' | 'chart';

/** What {@link loadConfigReport} found: the config, one line per ignored setting, and each variable's source. */
export interface ConfigReport {
  config: IpamdConfig;
  /** One line each: `<VAR>="<value>" is ignored: <why>` (log them once at start). */
  warnings: string[];
  /** Every variable of the spec, in documentation order, with where its value came from. */
  sources: Array<{ name: string; key: keyof IpamdConfig; source: SettingSource }>;
}

/**
 * Reads and validates ipamd's configuration from `env` (usually `process.env`).
 * Cross-field rules: POD_MTU defaults to AWS_VPC_ENI_MTU; ENI_IPAM_CNI_EXEC_SOCKET to
 * `cni-exec.sock` in ENI_IPAM_SOCKET's directory; WARM_PREFIX_TARGET without
 * ENABLE_PREFIX_DELEGATION=true is ignored (as amazon-vpc-cni-k8s ignores it); look-alike
 * names and settings that do nothing in the mode in force are warned about once each
 * (config-hints.ts); WARM_IP_TARGET/MINIMUM_IP_TARGET are allowed with prefix delegation (they then
 * count IPs, as upstream); ENABLE_IPv4/ENABLE_IPv6 give the IP family (config-family.ts,
 * its refusals). The aws-node variables eni-ipam does not honour are checked
 * (aws-node-check.ts).
 * @throws ConfigError (one-line message naming the variable) on the first bad or refused value.
 */
export function loadConfigReport(env: NodeJS.ProcessEnv): ConfigReport {
  const warnings = checkAwsNodeVars(env);
  const out: Record<string, unknown> = {};
  for (const spec of SPECS) {
    const value = parseVar(spec, env[spec.name]);
    if (value !== undefined) out[spec.key] = value;
  }
  const c = out as unknown as IpamdConfig;
  if (c.podMtu === undefined) c.podMtu = c.eniMtu;
  if (c.cniExecSocket === undefined) {
    c.cniExecSocket = `${c.socketPath.slice(0, c.socketPath.lastIndexOf('/') + 1)}cni-exec.sock`;
    const why = socketPathTooLong(c.cniExecSocket);
    if (why)
      throw new ConfigError(
        'ENI_IPAM_SOCKET',
        `ENI_IPAM_SOCKET=${quote(c.socketPath)} is invalid: the exec socket beside it (${quote(c.cniExecSocket)}) is too long: ${why}; set ENI_IPAM_CNI_EXEC_SOCKET or a shorter directory`,
      );
  }
  // Ignored, as amazon-vpc-cni-k8s ignores it (modeHints says so unless it is aws-node's default 1).
  if (c.warmPrefixTarget !== undefined && !c.enablePrefixDelegation) delete c.warmPrefixTarget;
  c.ipFamily = ipFamilyOf(c);
  warnings.push(...nameHints(env, KNOWN_NAMES), ...modeHints(env, c, SPECS));
  const chart = new Set(c.chartEnv);
  const sources = SPECS.map((s) => ({
    name: s.name,
    key: s.key,
    source: (env[s.name] === undefined || env[s.name] === ''
      ? 'default'
      : chart.has(s.name)
        ? 'chart'
        : 'env') as SettingSource,
  }));
  return { config: c, warnings, sources };
}

/**
 * {@link loadConfigReport}'s config alone (tests, tools that need no warnings).
 * @throws ConfigError (one-line message naming the variable) on the first bad or refused value.
 */
export function loadConfig(env: NodeJS.ProcessEnv): IpamdConfig {
  return loadConfigReport(env).config;
}

/**
 * The checks of {@link loadConfig} that need the filesystem, run once at start before
 * anything is opened: every path-valued setting of the spec, resolved through symlinks,
 * must stay out of /proc, /sys and /dev and be of the right type where something exists
 * (config-paths.ts). A missing file or directory is fine (first start).
 * @throws ConfigError (one line naming the variable, the value and what is accepted).
 */
export function checkConfigOnDisk(c: IpamdConfig): void {
  checkPathSettings(c, SPECS);
}

/**
 * `e`'s message, prefixed with the path setting it is about (`<VAR>="<value>": …`) when
 * its path is one of `c`'s path settings or lies under or over one (config-paths.ts), so
 * every path error at start names the variable.
 */
export function startErrorMessage(e: unknown, c: IpamdConfig): string {
  const msg = e instanceof Error ? e.message : String(e);
  const s = pathSettingOfError(e, c, SPECS);
  return s ? `${s.name}=${JSON.stringify(s.value)}: ${msg}` : msg;
}

/** Every variable ipamd reads, in documentation order (the spec; its path variables carry a `pathKindOf`). */
export function configSpecs(): readonly VarSpec[] {
  return SPECS;
}

/**
 * Every variable ipamd reads, with its default as operators see it and one sentence of
 * meaning, in documentation order (rendered into docs/configuration.md).
 */
export function describeEnvVars(): Array<{ name: string; default: string; description: string }> {
  return SPECS.map((s) => ({ name: s.name, default: s.shown ?? s.def ?? 'unset', description: s.description }));
}

/**
 * Every effective setting of `r`, keyed by variable, with its value (as ipamd holds it:
 * durations in ms, as the config key's `Ms` suffix says) and where it came from; what
 * ipamd logs once at start. Unset optional settings have no value.
 */
export function effectiveSettings(
  r: ConfigReport,
): Record<string, { key: string; value?: unknown; from: SettingSource }> {
  const out: Record<string, { key: string; value?: unknown; from: SettingSource }> = {};
  for (const s of r.sources) {
    const value = r.config[s.key];
    out[s.name] = { key: s.key, ...(value !== undefined ? { value } : {}), from: s.source };
  }
  return out;
}
