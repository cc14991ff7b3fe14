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
 * | AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG | false | custom networking: new ENIs in the node's ENIConfig subnet(s) with its security groups; the primary ENI serves no new pod |
 * | ENI_CONFIG_ANNOTATION_DEF | k8s.amazonaws.com/eniConfig | node annotation naming the ENIConfig (wins over the label) |
 * | ENI_CONFIG_LABEL_DEF | k8s.amazonaws.com/eniConfig | node label naming the ENIConfig (else `default`) |
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
import { socketPathTooLong } from './config-path-fields.js';
import { checkPathSettings } from './config-paths.js';
import { type VarSpec } from './config-spec.js';
import { ConfigError, type IpamdConfig } from './config-types.js';
import { NODE_VARS } from './config-vars-node.js';
import { TIMING_VARS } from './config-vars-timing.js';

export { ConfigError, type IpamdConfig } from './config-types.js';

/** Every variable, in documentation order. */
const SPECS: VarSpec[] = [...NODE_VARS, ...TIMING_VARS];

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
 * The checks of {@link loadConfig} that need the filesystem, run once at start before
 * anything is opened: every path-valued setting of the spec, resolved through symlinks,
 * must stay out of /proc, /sys and /dev and be of the right type where something exists
 * (config-paths.ts). A missing file or directory is fine (first start).
 * @throws ConfigError (one line naming the variable, the value and what is accepted).
 */
export function checkConfigOnDisk(c: IpamdConfig): void {
  checkPathSettings(c, SPECS);
}

/** Every variable ipamd reads, in documentation order (the spec; its path variables carry a `pathKindOf`). */
export function configSpecs(): readonly VarSpec[] {
  return SPECS;
}

/**
 * Every variable ipamd reads, with its default as operators see it and one sentence of
 * meaning, in documentation order (used to generate the README table).
 */
export function describeEnvVars(): Array<{ name: string; default: string; description: string }> {
  return SPECS.map((s) => ({ name: s.name, default: s.shown ?? s.def ?? 'unset', description: s.description }));
}
