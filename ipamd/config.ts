/**
 * ipamd configuration: environment variables → typed, validated {@link IpamdConfig}
 * (docs/design.md#env-vars; AWS-compatible names where amazon-vpc-cni-k8s has the concept).
 * A bad value throws {@link ConfigError} with one line naming the variable, the value and
 * what it accepts. An empty string counts as unset. Durations are stored in ms.
 *
 * | variable | default | meaning |
 * |---|---|---|
 * | WARM_ENI_TARGET | 1 | whole ENIs' worth of secondary IPs kept available (when no IP target is set) |
 * | WARM_IP_TARGET | unset | available IPs to keep; set (with or instead of MINIMUM_IP_TARGET) → warm-ip mode |
 * | MINIMUM_IP_TARGET | unset | floor on total IPs on the node |
 * | WARM_PREFIX_TARGET | unset | free /28 prefixes to keep; needs ENABLE_PREFIX_DELEGATION=true; WARM_IP_TARGET/MINIMUM_IP_TARGET override it |
 * | ENABLE_PREFIX_DELEGATION | false | assign /28 prefixes (16 addresses each) instead of single secondary IPs; Nitro instance types only |
 * | MAX_ENI | unset (instance limit) | cap on attached ENIs, ≥ 1 |
 * | IP_COOLDOWN_PERIOD | 30 (s) | how long a released IP waits before reuse |
 * | AWS_VPC_ENI_MTU | 9001 | MTU of the ENIs, 576–9001 |
 * | POD_MTU | AWS_VPC_ENI_MTU | MTU of pod interfaces, 576–9001 |
 * | AWS_VPC_K8S_CNI_VETHPREFIX | eni | host-side veth name prefix, 1–4 of [a-z0-9], not eth/lo/vlan |
 * | AWS_VPC_K8S_CNI_EXTERNALSNAT | false | SNAT is done outside the node (no SNAT rules) |
 * | AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS | empty | comma-separated IPv4 CIDRs not SNATed |
 * | CLUSTER_NAME | unset | value of the cluster tag on created ENIs |
 * | ADDITIONAL_ENI_TAGS | {} | JSON object of extra tags for created ENIs |
 * | DISABLE_LEAKED_ENI_CLEANUP | false | skip the leaked-ENI sweep |
 * | DISABLE_NETWORK_RESOURCE_PROVISIONING | false | never assign/create/free; serve what the ENIs hold |
 * | MY_NODE_NAME | unset | Kubernetes node name |
 * | AWS_EC2_ENDPOINT | unset (SDK default) | EC2 API endpoint URL |
 * | AWS_EC2_METADATA_SERVICE_ENDPOINT | http://169.254.169.254 | IMDS endpoint URL |
 * | CRI_RUNTIME_ENDPOINT | unset (auto-detect) | CRI socket: unix:///path or /path (stored as the path) |
 * | AWS_VPC_K8S_CNI_LOGLEVEL | info | trace, debug, info, warn, error or fatal (any case) |
 * | ENI_IPAM_LOG_FORMAT | json | json or pretty |
 * | ENI_IPAM_SOCKET | /var/run/eni-ipam/ipamd.sock | gRPC Unix socket |
 * | ENI_IPAM_CHECKPOINT_PATH | /var/run/eni-ipam/ipam.json | checkpoint file |
 * | METRICS_BIND_ADDRESS | :61678 | metrics HTTP host:port |
 * | INTROSPECTION_BIND_ADDRESS | 127.0.0.1:61679 | introspection HTTP host:port |
 * | DISABLE_METRICS | false | do not serve metrics |
 * | DISABLE_INTROSPECTION | false | do not serve introspection |
 * | ENI_IPAM_HOST_NETWORK | true | per-ENI links, route tables, ip rules and SNAT on the node |
 * | ENI_IPAM_INSTALL_CNI | true | once serving, install the plugin and the conflist |
 * | ENI_IPAM_CNI_CONF_DIR | /etc/cni/net.d | where the conflist goes (temp file + rename in the same dir) |
 * | ENI_IPAM_CNI_BIN_DIR | /opt/cni/bin | where the plugin is copied: the shim as `eni-ipam` (and the Node plugin `eni-ipam.cjs` only with ENI_IPAM_CNI_EXEC=false) |
 * | ENI_IPAM_CNI_EXEC | true | serve CNI invocations forwarded by the native shim in-process (false, developer mode: the Node plugin is installed and the shim runs it; needs Node on the host) |
 * | ENI_IPAM_CNI_EXEC_SOCKET | cni-exec.sock beside ENI_IPAM_SOCKET | the exec socket (mode 0600), named in the conflist as `execSocket` |
 * | ENI_IPAM_CNI_IPAMD_WAIT | 10s | written into the conflist as `ipamdWaitSeconds`: how long the shim's ADD waits for ipamd to serve (≤ 300 s) |
 * | ENI_IPAM_CNI_EXEC_NETNS | unset (ipamd's own) | netns path the exec socket wires the node side in (tests/demos running ipamd outside the node netns) |
 * | ENI_IPAM_ADD_WAIT_TIMEOUT | 10s | how long an ADD waits for a refill when the pool is empty |
 * | ENI_IPAM_SHRINK_DELAY | 60s | how long a surplus must persist before it is released |
 * | ENI_IPAM_RECONCILE_INTERVAL | 60s | period of the ENI reconcile (datastore vs EC2 and IMDS) |
 * | ENI_IPAM_GC_INTERVAL | 60s | period of the evidence pass (CRI, Kubernetes and kernel vs the datastore's allocations) |
 * | ENI_IPAM_GC_GRACE | 60s | minimum age of an allocation before the evidence pass may release it |
 * | ENI_IPAM_NETWORK_NAME | aws-cni | CNI network name used for sandboxes adopted from the runtime |
 * | ENI_IPAM_POOL_INTERVAL | 5s | pool re-evaluation period when nothing triggers it |
 * | ENI_IPAM_MIN_ENI_AGE | 60s | an ENI younger than this is never freed by shrink |
 * | ENI_IPAM_IMDS_ENI_WAIT | 30s | how long grow waits for IMDS to list a new ENI before the reconcile takes over |
 * | ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL | 1h | period of the leaked-ENI sweep |
 * | ENI_IPAM_LEAKED_ENI_SWEEP_JITTER | 300s | the first sweep starts after a random delay up to this |
 * | ENI_IPAM_EC2_RATE | 5 | node-local EC2 call rate (calls/s, fractions allowed, ≤ 1000) |
 * | ENI_IPAM_EC2_BURST | 20 | node-local EC2 burst (calls, 1–10000) |
 * | ENI_IPAM_EC2_TIMEOUT | 10s | timeout of one EC2 attempt |
 * | ENI_IPAM_EC2_MAX_ATTEMPTS | 5 | attempts per EC2 call, the first included (1–20); retries back off with jitter |
 * | AWS_VPC_K8S_CNI_LOG_FILE | stdout | ipamd's log: stdout or an absolute file path (rotated) |
 * | AWS_VPC_K8S_PLUGIN_LOG_FILE | /var/log/aws-routed-eni/plugin.log | the plugin's log file, written into the conflist (not stdout) |
 * | ENI_IPAM_LOG_FILE_MAX_SIZE | 100M | size at which a log file is rotated (K, M, G) |
 * | ENI_IPAM_LOG_FILE_MAX_FILES | 5 | rotated files kept per log (gzip) |
 * | ENI_IPAM_AWS_NODE_CHECKPOINT_PATH | /var/run/aws-node/ipam.json | aws-node's checkpoint, imported when ours is absent and it is from this boot |
 *
 * Durations: a plain number is seconds (fractions allowed), or a number with unit ms, s, m, h;
 * at most 596h (Node's timer limit).
 * Booleans: true, false, 1, 0 (any case).
 */
import { realpathSync, statSync } from 'node:fs';
import {
  absolutePath,
  bool,
  criEndpoint,
  duration,
  fileSize,
  hostPort,
  httpUrl,
  ipv4CidrList,
  logTarget,
  oneOf,
  pluginLogFile,
  positiveDecimal,
  pseudoFsOf,
  socketPathTooLong,
  stateFilePath,
  tagMap,
  text,
  unixSocketPath,
  vethPrefix,
  wholeNumber,
  type Field,
} from './config-fields.js';

/** The validated ipamd configuration. Durations are in ms. */
export interface IpamdConfig {
  warmEniTarget: number;
  warmIpTarget?: number;
  minimumIpTarget?: number;
  warmPrefixTarget?: number;
  enablePrefixDelegation: boolean;
  maxEni?: number;
  ipCooldownMs: number;
  eniMtu: number;
  podMtu: number;
  vethPrefix: string;
  externalSnat: boolean;
  excludeSnatCidrs: string[];
  clusterName?: string;
  additionalEniTags: Record<string, string>;
  disableLeakedEniCleanup: boolean;
  disableNetworkResourceProvisioning: boolean;
  nodeName?: string;
  ec2Endpoint?: string;
  imdsEndpoint: string;
  criRuntimeEndpoint?: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';
  logFormat: 'json' | 'pretty';
  socketPath: string;
  checkpointPath: string;
  metricsBindAddress: string;
  introspectionBindAddress: string;
  installCni: boolean;
  cniConfDir: string;
  cniBinDir: string;
  hostNetworking: boolean;
  cniExec: boolean;
  cniExecSocket: string;
  cniExecNetns?: string;
  cniIpamdWaitMs: number;
  disableMetrics: boolean;
  disableIntrospection: boolean;
  addWaitTimeoutMs: number;
  shrinkDelayMs: number;
  reconcileIntervalMs: number;
  gcIntervalMs: number;
  gcGraceMs: number;
  poolIntervalMs: number;
  ec2RatePerSecond: number;
  ec2Burst: number;
  ec2TimeoutMs: number;
  ec2MaxAttempts: number;
  networkName: string;
  minEniAgeMs: number;
  imdsEniWaitMs: number;
  leakedEniSweepIntervalMs: number;
  leakedEniSweepJitterMs: number;
  restartConfirmJitterMs: number;
  awsNodeCheckpointPath: string;
  logFile: string;
  pluginLogFile: string;
  logFileMaxSize: string;
  logFileMaxFiles: number;
  taintWhenExhausted: boolean;
}

/** A bad environment variable. `message` is one line: variable, value, what it accepts. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
    this.name = 'ConfigError';
  }
}

interface VarSpec {
  name: string;
  key: keyof IpamdConfig;
  field: Field<unknown>;
  /** Default as an env string (parsed by `field`), or undefined for "unset". */
  def?: string;
  /** Default as shown to operators, when it is not `def`. */
  shown?: string;
  description: string;
}

const v = <K extends keyof IpamdConfig>(
  name: string,
  key: K,
  field: Field<NonNullable<IpamdConfig[K]>>,
  def: string | undefined,
  description: string,
  shown?: string,
): VarSpec => ({
  name,
  key,
  field: field as Field<unknown>,
  ...(def !== undefined ? { def } : {}),
  ...(shown !== undefined ? { shown } : {}),
  description,
});

const SPECS: VarSpec[] = [
  v(
    'WARM_ENI_TARGET',
    'warmEniTarget',
    wholeNumber(0),
    '1',
    "Whole ENIs' worth of secondary IPs kept available when neither WARM_IP_TARGET nor MINIMUM_IP_TARGET is set.",
  ),
  v(
    'WARM_IP_TARGET',
    'warmIpTarget',
    wholeNumber(0),
    undefined,
    'Available IPs to keep; setting it or MINIMUM_IP_TARGET switches to warm-ip mode.',
  ),
  v('MINIMUM_IP_TARGET', 'minimumIpTarget', wholeNumber(0), undefined, 'Floor on the total IPs on the node.'),
  v(
    'WARM_PREFIX_TARGET',
    'warmPrefixTarget',
    wholeNumber(0),
    undefined,
    'Free /28 prefixes (no address in use) to keep; requires ENABLE_PREFIX_DELEGATION=true; ignored when WARM_IP_TARGET or MINIMUM_IP_TARGET is set (they count IPs, rounded up to prefixes).',
  ),
  v(
    'ENABLE_PREFIX_DELEGATION',
    'enablePrefixDelegation',
    bool(),
    'false',
    'Assign /28 prefixes (16 addresses each, Ipv4PrefixCount) to ENIs instead of single secondary IPs; refused at start on non-Nitro instance types. Without WARM_PREFIX_TARGET/WARM_IP_TARGET/MINIMUM_IP_TARGET, WARM_ENI_TARGET counts whole ENIs of prefixes.',
  ),
  v(
    'MAX_ENI',
    'maxEni',
    wholeNumber(1),
    undefined,
    'Cap on attached ENIs (the instance type limit still applies).',
    'instance limit',
  ),
  v(
    'IP_COOLDOWN_PERIOD',
    'ipCooldownMs',
    duration(),
    '30',
    'Seconds a released IP waits before it is handed out again.',
    '30 s',
  ),
  v('AWS_VPC_ENI_MTU', 'eniMtu', wholeNumber(576, 9001), '9001', 'MTU of the ENIs (576-9001).'),
  v('POD_MTU', 'podMtu', wholeNumber(576, 9001), undefined, 'MTU of pod interfaces (576-9001).', 'AWS_VPC_ENI_MTU'),
  v(
    'AWS_VPC_K8S_CNI_VETHPREFIX',
    'vethPrefix',
    vethPrefix(),
    'eni',
    'Host-side veth name prefix: 1-4 of [a-z0-9], not eth, lo or vlan.',
  ),
  v(
    'AWS_VPC_K8S_CNI_EXTERNALSNAT',
    'externalSnat',
    bool(),
    'false',
    'SNAT is done outside the node: ipamd installs no SNAT rules.',
  ),
  v(
    'AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS',
    'excludeSnatCidrs',
    ipv4CidrList(),
    '',
    'Comma-separated IPv4 CIDRs that pod traffic reaches without SNAT.',
    'empty',
  ),
  v('CLUSTER_NAME', 'clusterName', text(256), undefined, 'Cluster name, tagged on the ENIs ipamd creates.'),
  v(
    'ADDITIONAL_ENI_TAGS',
    'additionalEniTags',
    tagMap(),
    '{}',
    'JSON object of extra tags for created ENIs (no aws:*, node.k8s.amazonaws.com/*, cluster.k8s.amazonaws.com/name).',
  ),
  v(
    'DISABLE_LEAKED_ENI_CLEANUP',
    'disableLeakedEniCleanup',
    bool(),
    'false',
    'Skip the sweep that deletes leaked ENIs ipamd created.',
  ),
  v(
    'DISABLE_NETWORK_RESOURCE_PROVISIONING',
    'disableNetworkResourceProvisioning',
    bool(),
    'false',
    'Never assign, create or free: serve only what the ENIs already hold.',
  ),
  v('MY_NODE_NAME', 'nodeName', text(253), undefined, 'Kubernetes node name of this node.'),
  v('AWS_EC2_ENDPOINT', 'ec2Endpoint', httpUrl(), undefined, 'EC2 API endpoint URL.', 'SDK default'),
  v(
    'AWS_EC2_METADATA_SERVICE_ENDPOINT',
    'imdsEndpoint',
    httpUrl(),
    'http://169.254.169.254',
    'Instance metadata service (IMDSv2) endpoint URL.',
  ),
  v(
    'CRI_RUNTIME_ENDPOINT',
    'criRuntimeEndpoint',
    criEndpoint(),
    undefined,
    'CRI socket (unix:///path or /path).',
    'auto-detect',
  ),
  v(
    'AWS_VPC_K8S_CNI_LOGLEVEL',
    'logLevel',
    oneOf(['trace', 'debug', 'info', 'warn', 'error', 'fatal']),
    'info',
    'Log level: trace, debug, info, warn, error or fatal (any case).',
  ),
  v('ENI_IPAM_LOG_FORMAT', 'logFormat', oneOf(['json', 'pretty']), 'json', 'Log format: json or pretty.'),
  v(
    'ENI_IPAM_SOCKET',
    'socketPath',
    unixSocketPath(),
    '/var/run/eni-ipam/ipamd.sock',
    'Unix socket of the gRPC service the CNI plugin calls (at most 107 bytes, the sun_path limit).',
  ),
  v(
    'ENI_IPAM_CHECKPOINT_PATH',
    'checkpointPath',
    stateFilePath(),
    '/var/run/eni-ipam/ipam.json',
    'Checkpoint file of the allocations (a file path; refused under /proc, /sys or /dev, or when it is a directory).',
  ),
  v(
    'METRICS_BIND_ADDRESS',
    'metricsBindAddress',
    hostPort(),
    ':61678',
    'host:port of the Prometheus metrics endpoint.',
  ),
  v(
    'INTROSPECTION_BIND_ADDRESS',
    'introspectionBindAddress',
    hostPort(),
    '127.0.0.1:61679',
    'host:port of the introspection HTTP endpoint.',
  ),
  v('DISABLE_METRICS', 'disableMetrics', bool(), 'false', 'Do not serve metrics.'),
  v('DISABLE_INTROSPECTION', 'disableIntrospection', bool(), 'false', 'Do not serve introspection.'),
  v(
    'ENI_IPAM_HOST_NETWORK',
    'hostNetworking',
    bool(),
    'true',
    'Set up per-ENI links, route tables, ip rules and SNAT on the node (off only for demos/tests without real ENIs).',
  ),
  v(
    'ENI_IPAM_INSTALL_CNI',
    'installCni',
    bool(),
    'true',
    'Once serving, copy the plugin into the CNI bin dir and write the conflist into the CNI conf dir.',
  ),
  v(
    'ENI_IPAM_CNI_CONF_DIR',
    'cniConfDir',
    absolutePath(),
    '/etc/cni/net.d',
    'CNI conf dir the conflist is written to (temp file + rename in the same dir).',
  ),
  v(
    'ENI_IPAM_CNI_BIN_DIR',
    'cniBinDir',
    absolutePath(),
    '/opt/cni/bin',
    'CNI bin dir the plugin is copied to: the native shim as eni-ipam (plus the Node plugin eni-ipam.cjs only with ENI_IPAM_CNI_EXEC=false).',
  ),
  v(
    'ENI_IPAM_CNI_EXEC',
    'cniExec',
    bool(),
    'true',
    'Serve CNI invocations forwarded by the native shim on the exec socket, in-process (no Node start per pod). false is a developer mode: no exec socket; the Node plugin is installed beside the shim, named in the conflist as nodePlugin, and run for every call (needs Node on the host).',
  ),
  v(
    'ENI_IPAM_CNI_EXEC_SOCKET',
    'cniExecSocket',
    unixSocketPath(),
    undefined,
    'Unix socket (mode 0600, at most 107 bytes) of the CNI exec server, written into the conflist as execSocket.',
    'cni-exec.sock beside ENI_IPAM_SOCKET',
  ),
  v(
    'ENI_IPAM_CNI_IPAMD_WAIT',
    'cniIpamdWaitMs',
    duration(),
    '10s',
    "Written into the conflist as ipamdWaitSeconds: how long the shim's ADD waits (retrying) for ipamd to serve, e.g. during a DaemonSet rolling update, before CNI error 11 (at most 300s).",
  ),
  v(
    'ENI_IPAM_CNI_EXEC_NETNS',
    'cniExecNetns',
    absolutePath(),
    undefined,
    "Network namespace (path) in which exec-socket invocations wire the node side; only shims running in it are served. For tests and demos that run ipamd outside the node's namespace.",
    "ipamd's own",
  ),
  v(
    'ENI_IPAM_ADD_WAIT_TIMEOUT',
    'addWaitTimeoutMs',
    duration(),
    '10s',
    'How long an ADD waits for a refill when the pool is empty.',
  ),
  v(
    'ENI_IPAM_SHRINK_DELAY',
    'shrinkDelayMs',
    duration(),
    '60s',
    'How long a surplus must persist before it is released.',
  ),
  v(
    'ENI_IPAM_RECONCILE_INTERVAL',
    'reconcileIntervalMs',
    duration(1),
    '60s',
    "Period of the ENI reconcile (the datastore's ENIs and addresses against EC2 and IMDS).",
  ),
  v(
    'ENI_IPAM_GC_INTERVAL',
    'gcIntervalMs',
    duration(1),
    '60s',
    "Period of the evidence pass (the CRI runtime, Kubernetes and the kernel read against the datastore's allocations; leaked ones released after ENI_IPAM_GC_GRACE).",
  ),
  v(
    'ENI_IPAM_GC_GRACE',
    'gcGraceMs',
    duration(),
    '60s',
    'Minimum age of an allocation before the evidence pass may release it (an ADD still in progress has no READY sandbox yet).',
  ),
  v(
    'ENI_IPAM_NETWORK_NAME',
    'networkName',
    text(128),
    'aws-cni',
    'CNI network name ("name" of the conflist), used for sandboxes adopted from the runtime.',
  ),
  v(
    'ENI_IPAM_POOL_INTERVAL',
    'poolIntervalMs',
    duration(1),
    '5s',
    'How often the pool controller re-evaluates when nothing triggers it.',
  ),
  v(
    'ENI_IPAM_MIN_ENI_AGE',
    'minEniAgeMs',
    duration(),
    '60s',
    'An ENI younger than this is never freed by shrink (it was just created for demand).',
  ),
  v(
    'ENI_IPAM_IMDS_ENI_WAIT',
    'imdsEniWaitMs',
    duration(),
    '30s',
    'How long grow waits (with backoff) for IMDS to list a new ENI before leaving it pending for the reconcile; its IPs are not served before IMDS lists it.',
  ),
  v(
    'ENI_IPAM_LEAKED_ENI_SWEEP_INTERVAL',
    'leakedEniSweepIntervalMs',
    duration(1),
    '1h',
    'Period of the sweep that deletes leaked ENIs (ours, available, createdAt older than 5 min); off with DISABLE_LEAKED_ENI_CLEANUP.',
  ),
  v(
    'ENI_IPAM_LEAKED_ENI_SWEEP_JITTER',
    'leakedEniSweepJitterMs',
    duration(),
    '300s',
    'The first leaked-ENI sweep starts after a random delay up to this, so nodes started together do not sweep in step.',
  ),
  v(
    'ENI_IPAM_RESTART_CONFIRM_JITTER',
    'restartConfirmJitterMs',
    duration(),
    '10s',
    'A restart in the same boot serves from the cached ENI inventory at once; EC2 confirms it after a random delay up to this (releases wait for it), so a fleet restarting together does not describe in step.',
  ),
  v(
    'ENI_IPAM_EC2_RATE',
    'ec2RatePerSecond',
    positiveDecimal(1000),
    '5',
    'Node-local EC2 call rate in calls per second (token bucket refill; fractions allowed).',
  ),
  v(
    'ENI_IPAM_EC2_BURST',
    'ec2Burst',
    wholeNumber(1, 10000),
    '20',
    'Node-local EC2 burst: calls that may go out at once before the rate applies.',
  ),
  v('ENI_IPAM_EC2_TIMEOUT', 'ec2TimeoutMs', duration(1), '10s', 'Timeout of one EC2 attempt.'),
  v(
    'ENI_IPAM_EC2_MAX_ATTEMPTS',
    'ec2MaxAttempts',
    wholeNumber(1, 20),
    '5',
    'Attempts per EC2 call, the first included; throttled and 5xx attempts are retried with jittered exponential backoff.',
  ),
  v(
    'ENI_IPAM_AWS_NODE_CHECKPOINT_PATH',
    'awsNodeCheckpointPath',
    absolutePath(),
    '/var/run/aws-node/ipam.json',
    "amazon-vpc-cni-k8s's checkpoint: imported when ipamd has no checkpoint of its own and this file was written during this boot (taking over a node from aws-node).",
  ),
  v(
    'AWS_VPC_K8S_CNI_LOG_FILE',
    'logFile',
    logTarget(),
    'stdout',
    "ipamd's log: stdout, or a file rotated at ENI_IPAM_LOG_FILE_MAX_SIZE (amazon-vpc-cni-k8s's default, which the chart sets, is /host/var/log/aws-routed-eni/ipamd.log).",
  ),
  v(
    'AWS_VPC_K8S_PLUGIN_LOG_FILE',
    'pluginLogFile',
    pluginLogFile(),
    '/var/log/aws-routed-eni/plugin.log',
    "The CNI plugin's log file, written into the installed conflist (logFile); one JSON line per invocation, rotated like ipamd's. Not stdout.",
  ),
  v(
    'ENI_IPAM_LOG_FILE_MAX_SIZE',
    'logFileMaxSize',
    fileSize(),
    '100M',
    'Size at which a log file is rotated (to <file>.1.gz; K, M or G).',
  ),
  v(
    'ENI_IPAM_LOG_FILE_MAX_FILES',
    'logFileMaxFiles',
    wholeNumber(1, 100),
    '5',
    'Rotated log files kept per log (gzip-compressed).',
  ),
  v(
    'ENI_IPAM_TAINT_WHEN_EXHAUSTED',
    'taintWhenExhausted',
    bool(),
    'false',
    'Taint the node eni-ipam.io/no-ip-available:NoSchedule while it can serve no new pod (no IP available and the pool cannot grow), removed as soon as it can; never for frozen releases alone. Needs MY_NODE_NAME and node patch rights (chart: taintWhenExhausted).',
  ),
];

/** Quotes a value for a one-line message (JSON escapes, long values cut to 120 characters). */
function quote(raw: string): string {
  const s = raw.length > 120 ? `${raw.slice(0, 120)}…` : raw;
  return JSON.stringify(s);
}

function parseVar(spec: VarSpec, raw: string | undefined): unknown {
  const given = raw === undefined || raw === '' ? undefined : raw;
  const input = given ?? spec.def;
  if (input === undefined) return undefined;
  const r = spec.field.safeParse(input);
  if (r.success) return r.data;
  const why = r.error.issues[0]?.message ?? 'invalid value';
  throw new ConfigError(spec.name, `${spec.name}=${quote(input)} is invalid: ${why.replace(/\s*\n\s*/g, ' ')}`);
}

/**
 * Reads and validates ipamd's configuration from `env` (usually `process.env`).
 * Cross-field rules: POD_MTU defaults to AWS_VPC_ENI_MTU; ENI_IPAM_CNI_EXEC_SOCKET to
 * `cni-exec.sock` in ENI_IPAM_SOCKET's directory; WARM_PREFIX_TARGET needs
 * ENABLE_PREFIX_DELEGATION=true; WARM_IP_TARGET/MINIMUM_IP_TARGET are allowed with prefix
 * delegation (they then count IPs, as in amazon-vpc-cni-k8s).
 * @throws ConfigError (one-line message naming the variable) on the first bad value.
 */
export function loadConfig(env: NodeJS.ProcessEnv): IpamdConfig {
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
  if (c.cniIpamdWaitMs > 300_000)
    throw new ConfigError(
      'ENI_IPAM_CNI_IPAMD_WAIT',
      `ENI_IPAM_CNI_IPAMD_WAIT=${quote(env.ENI_IPAM_CNI_IPAMD_WAIT ?? '')} is invalid: expected a duration up to 300s (the shim's bound)`,
    );
  if (c.warmPrefixTarget !== undefined && !c.enablePrefixDelegation) {
    throw new ConfigError(
      'WARM_PREFIX_TARGET',
      `WARM_PREFIX_TARGET=${quote(env.WARM_PREFIX_TARGET ?? '')} is invalid: it requires ENABLE_PREFIX_DELEGATION=true (ENABLE_PREFIX_DELEGATION is ${quote(env.ENABLE_PREFIX_DELEGATION || 'false')})`,
    );
  }
  return c;
}

/**
 * The checks of {@link loadConfig} that need the filesystem, run once at start: the
 * checkpoint path (ENI_IPAM_CHECKPOINT_PATH), when something exists there, must be a
 * regular file (not a directory, device, socket...) and must not resolve (through
 * symlinks) into /proc, /sys or /dev. A missing file is fine (first start).
 * @throws ConfigError (one line naming the variable).
 */
export function checkConfigOnDisk(c: IpamdConfig): void {
  const name = 'ENI_IPAM_CHECKPOINT_PATH';
  let st;
  try {
    st = statSync(c.checkpointPath);
  } catch {
    return; // absent (or its directory is): created at start
  }
  const bad = (why: string) => new ConfigError(name, `${name}=${quote(c.checkpointPath)} is invalid: ${why}`);
  if (st.isDirectory())
    throw bad('it is a directory; expected the path of the checkpoint file (e.g. /var/run/eni-ipam/ipam.json)');
  if (!st.isFile()) throw bad('it exists and is not a regular file; expected the path of the checkpoint file');
  const real = realpathSync(c.checkpointPath);
  const fs = pseudoFsOf(real);
  if (fs)
    throw bad(`it resolves to ${quote(real)} under ${fs}, a pseudo filesystem that can never hold the checkpoint`);
}

/**
 * Every variable ipamd reads, with its default as operators see it and one sentence of
 * meaning, in documentation order (used to generate the README table).
 */
export function describeEnvVars(): Array<{ name: string; default: string; description: string }> {
  return SPECS.map((s) => ({ name: s.name, default: s.shown ?? s.def ?? 'unset', description: s.description }));
}
