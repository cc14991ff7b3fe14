/**
 * Start-up warnings about settings that would otherwise do nothing without a word
 * (docs/configuration.md): a variable whose name is a setting's in another case
 * (`ENABLE_IPV6`: names are case-sensitive, so ipamd runs IPv4 only) or within a small
 * edit distance of one (`WARM_IP_TARGETS`), naming the setting meant; and a setting that
 * does nothing in the mode in force (`WARM_IP_TARGET` in IPv6 mode), once, unless it
 * holds its default or the value aws-node's DaemonSet gives it. Only names that look like
 * ours or aws-node's are considered: never PATH, HOSTNAME, KUBERNETES_*, Service links or
 * the AWS SDK's own variables. Pure: env and config in, lines out.
 */
import { distance } from 'fastest-levenshtein';
import { isAwsNodeDefault } from './aws-node-manifest.js';
import { isBlank } from './config-patterns.js';
import type { VarSpec } from './config-spec.js';
import { quoteValue, type IpamdConfig } from './config-types.js';

/** Variables ipamd's parts read outside the spec (the loader, the plugin, a test clock), never hinted about. */
const READ_ELSEWHERE = [
  'ENI_IPAM_CNI_CODE_CACHE',
  'ENI_IPAM_BUILD_VERSION',
  'ENI_IPAM_SHIM_TRACE',
  'ENI_IPAM_SHIM_DEBUG',
  'ENI_IPAM_TEST_WALL_OFFSET_FILE',
];

/** The AWS SDK's own variables (credentials, region, endpoints): theirs, never a typo of ours. */
const AWS_SDK =
  /^AWS_(REGION|DEFAULT_REGION|PROFILE|ROLE_ARN|ROLE_SESSION_NAME|WEB_IDENTITY_TOKEN_FILE|ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN|STS_REGIONAL_ENDPOINTS|CONTAINER_.*|EC2_METADATA_(DISABLED|V1_DISABLED|SERVICE_ENDPOINT_MODE)|CONFIG_FILE|SHARED_CREDENTIALS_FILE|SDK_.*|MAX_ATTEMPTS|RETRY_MODE|USE_FIPS_ENDPOINT|USE_DUALSTACK_ENDPOINT|ENDPOINT_URL.*|CA_BUNDLE|NODEJS_.*|IGNORE_CONFIGURED_ENDPOINT_URLS|EXECUTION_ENV|LAMBDA_.*)$/;

/** Kubernetes' own variables: the API server's address and every Service link (`<SVC>_SERVICE_HOST`, `<SVC>_PORT_80_TCP`…). */
const KUBERNETES =
  /^KUBERNETES_|_SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)$|_PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?$/;

/**
 * Largest edit distance (upper-cased) at which `known` is offered for an unknown name: a
 * name that close looks like ours (no common variable, PATH, HOME, HOSTNAME, NODE_ENV,
 * HTTP_PROXY…, is that close to one: test/unit/config-hints.test.ts).
 */
const reach = (known: string): number => (known.length >= 12 ? 2 : 1);

/**
 * One warning per variable of `env` whose name is not a setting but looks like one: the
 * same name in another case, or within {@link reach} of a setting's name. `known` are
 * every name ipamd reads (the spec and the aws-node table).
 */
export function nameHints(env: NodeJS.ProcessEnv, known: readonly string[]): string[] {
  const names = new Set([...known, ...READ_ELSEWHERE]);
  const byUpper = new Map([...names].map((n) => [n.toUpperCase(), n]));
  const out: string[] = [];
  for (const [name, raw] of Object.entries(env)) {
    if (names.has(name) || raw === undefined || isBlank(raw) || AWS_SDK.test(name) || KUBERNETES.test(name)) continue;
    const upper = name.toUpperCase();
    const sameCase = byUpper.get(upper);
    if (sameCase) {
      out.push(`${name}=${quoteValue(raw)} is ignored: variable names are case-sensitive; did you mean ${sameCase}?`);
      continue;
    }
    let best: { n: string; d: number } | undefined;
    for (const [u, n] of byUpper) {
      const d = distance(upper, u);
      if (d <= reach(n) && (!best || d < best.d)) best = { n, d };
    }
    if (!best) continue;
    out.push(`${name}=${quoteValue(raw)} is ignored: no such setting; did you mean ${best.n}?`);
  }
  return out;
}

/** Settings that do nothing while `when` holds, and why. */
interface ModeRule {
  when: (c: IpamdConfig) => boolean;
  names: readonly string[];
  why: (c: IpamdConfig) => string;
}

const POOL = ['WARM_ENI_TARGET', 'WARM_IP_TARGET', 'MINIMUM_IP_TARGET', 'WARM_PREFIX_TARGET', 'MAX_ENI'];

/** In order: the first rule that names a setting says why it does nothing. */
const MODE_RULES: readonly ModeRule[] = [
  {
    when: (c) => c.ipFamily === 'ipv6',
    names: [
      ...POOL,
      'ENABLE_SUBNET_DISCOVERY',
      'DISABLE_LEAKED_ENI_CLEANUP',
      'AWS_VPC_K8S_CNI_EXTERNALSNAT',
      'AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS',
      'ENI_IPAM_SHRINK_DELAY',
      'ENI_IPAM_MIN_ENI_AGE',
      'ENI_IPAM_IMDS_ENI_WAIT',
      'ENI_IPAM_POOL_INTERVAL',
      'ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL',
      'ENI_IPAM_LEAKED_ENI_SWEEP_JITTER',
    ],
    why: () =>
      "it does nothing in IPv6 mode (ENABLE_IPv6=true, ENABLE_IPv4=false): pods get /128s from the primary ENI's /80, with no warm pool, no secondary ENI, and IPv4 egress always SNATed to the node's IPv4",
  },
  {
    when: (c) => c.disableNetworkResourceProvisioning,
    names: [...POOL, 'ENI_IPAM_SHRINK_DELAY', 'ENI_IPAM_MIN_ENI_AGE'],
    why: () =>
      'it does nothing with DISABLE_NETWORK_RESOURCE_PROVISIONING=true: ipamd serves only what the ENIs already hold',
  },
  {
    when: (c) => !c.enablePrefixDelegation,
    names: ['WARM_PREFIX_TARGET'],
    why: () => 'it applies only with ENABLE_PREFIX_DELEGATION=true (ENABLE_PREFIX_DELEGATION is false)',
  },
  {
    when: (c) => c.warmIpTarget !== undefined || c.minimumIpTarget !== undefined,
    names: ['WARM_ENI_TARGET', 'WARM_PREFIX_TARGET'],
    why: () => 'WARM_IP_TARGET or MINIMUM_IP_TARGET is set, and the targets count IPs then',
  },
  {
    when: (c) => c.externalSnat,
    names: ['AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS', 'AWS_VPC_K8S_CNI_RANDOMIZESNAT'],
    why: () => 'with AWS_VPC_K8S_CNI_EXTERNALSNAT=true ipamd installs no SNAT rule',
  },
  {
    when: (c) => c.customNetworkCfg,
    names: ['ENABLE_SUBNET_DISCOVERY'],
    why: () => "with custom networking new ENIs go to the ENIConfig's subnets",
  },
  {
    when: (c) => !c.customNetworkCfg,
    names: ['ENI_CONFIG_ANNOTATION_DEF', 'ENI_CONFIG_LABEL_DEF'],
    why: () => 'it applies only with AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true',
  },
  {
    when: (c) => !c.nodePortSupport,
    names: ['AWS_VPC_K8S_CNI_CONNMARK'],
    why: () => 'it applies only with AWS_VPC_CNI_NODE_PORT_SUPPORT=true',
  },
  { when: (c) => c.disableMetrics, names: ['METRICS_BIND_ADDRESS'], why: () => 'DISABLE_METRICS=true' },
  {
    when: (c) => c.disableIntrospection,
    names: ['INTROSPECTION_BIND_ADDRESS'],
    why: () => 'DISABLE_INTROSPECTION=true',
  },
  {
    when: (c) => c.disableLeakedEniCleanup,
    names: ['ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL', 'ENI_IPAM_LEAKED_ENI_SWEEP_JITTER'],
    why: () => 'DISABLE_LEAKED_ENI_CLEANUP=true: there is no sweep',
  },
  {
    when: (c) => c.cniConflistFile !== undefined,
    names: ['ENABLE_BANDWIDTH_PLUGIN'],
    why: () => 'ENI_IPAM_CNI_CONFLIST_FILE is installed as written',
  },
  {
    when: (c) => c.logFile === 'stdout',
    names: ['ENI_IPAM_LOG_FILE_MAX_SIZE', 'ENI_IPAM_LOG_FILE_MAX_FILES'],
    why: () => 'ipamd logs to stdout (AWS_VPC_K8S_CNI_LOG_FILE), which is not rotated',
  },
];

/**
 * One warning per setting of `env` that does nothing with config `c` (the rules above),
 * unless its value is its default (parsed) or aws-node's DaemonSet default.
 */
export function modeHints(env: NodeJS.ProcessEnv, c: IpamdConfig, specs: readonly VarSpec[]): string[] {
  const spec = new Map(specs.map((s) => [s.name, s]));
  const said = new Set<string>();
  const out: string[] = [];
  for (const rule of MODE_RULES) {
    if (!rule.when(c)) continue;
    for (const name of rule.names) {
      const raw = env[name];
      if (said.has(name) || raw === undefined || isBlank(raw) || isAwsNodeDefault(name, raw)) continue;
      const s = spec.get(name);
      if (s?.def !== undefined && sameValue(s, raw, s.def)) continue;
      said.add(name);
      out.push(`${name}=${quoteValue(raw)} is ignored: ${rule.why(c)}`);
    }
  }
  return out;
}

/** True when `a` and `b` parse to the same value for `s` (both valid). */
function sameValue(s: VarSpec, a: string, b: string): boolean {
  const x = s.field.safeParse(a);
  const y = s.field.safeParse(b);
  return x.success && y.success && JSON.stringify(x.data) === JSON.stringify(y.data);
}
