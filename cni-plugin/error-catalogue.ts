/**
 * Every CNI error this project answers, in one place: the plugin's (TypeScript, inside
 * ipamd or the Node plugin) and the native shim's (cni-plugin/shim/eni-ipam-shim.c, which
 * answers while ipamd cannot). The table in docs/design.md#cni-errors is rendered from
 * this list ({@link renderCniErrorTable}; `node scripts/cni-error-table.mjs` rewrites it)
 * and test/unit/cni-error-catalogue.test.ts checks the docs, the TypeScript call sites and
 * the C source against it.
 *
 * Codes follow the CNI spec (SPEC.md "Error": 1 incompatible version, 4 invalid necessary
 * environment variables, 5 I/O failure, 6 decode failure, 7 invalid network config, 11 try
 * again later; STATUS 50/51); 100 is ours. Rule: a failure a retry can cure (ipamd down or
 * restarting, its checkpoint write failed, no address yet, EC2 throttled) is 11 with the
 * cause in `msg`/`details`; a failure of the input is the spec's code for it.
 */
import { CniCode, CniError, type CniErrorEntry } from './errors.js';

export type { CniErrorEntry } from './errors.js';
import { SHIM_ERRORS } from './shim-errors.js';

/** The plugin's entries (TypeScript verbs, in ipamd or the Node plugin). */
const PLUGIN_ERRORS = {
  // ---- 1: incompatible version
  'version-unsupported': {
    code: CniCode.IncompatibleVersion,
    msg: 'unsupported cniVersion {version}',
    when: 'cniVersion is not one this plugin speaks',
    by: 'plugin',
  },
  'gc-version': {
    code: CniCode.IncompatibleVersion,
    msg: 'config version does not allow GC',
    when: 'GC with cniVersion < 1.1.0',
    by: 'plugin',
  },
  'check-version': {
    code: CniCode.IncompatibleVersion,
    msg: 'config version does not allow CHECK',
    when: 'CHECK with cniVersion < 0.4.0',
    by: 'plugin',
  },
  'status-version': {
    code: CniCode.IncompatibleVersion,
    msg: 'config version does not allow STATUS',
    when: 'STATUS with cniVersion < 1.1.0',
    by: 'plugin',
  },
  // ---- 4: invalid necessary environment variables
  'env-no-command': { code: CniCode.InvalidEnv, msg: 'missing CNI_COMMAND', when: 'CNI_COMMAND unset', by: 'plugin' },
  'env-bad-command': {
    code: CniCode.InvalidEnv,
    msg: 'CNI_COMMAND {verb} is not implemented yet',
    when: 'an unknown verb',
    by: 'plugin',
  },
  'env-missing': {
    code: CniCode.InvalidEnv,
    msg: 'missing {vars}',
    when: 'CNI_CONTAINERID, CNI_NETNS (ADD, CHECK) or CNI_IFNAME unset',
    by: 'plugin',
  },
  'env-args': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_ARGS',
    when: 'a pair without "=", a key given twice, an unknown key without IgnoreUnknown, a bad IgnoreUnknown value',
    by: 'plugin',
  },
  'env-args-control': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_ARGS: {key} holds a control character',
    when: 'a CNI_ARGS key or value holds a control character (e.g. a newline in K8S_POD_NAMESPACE); refused, never dropped',
    by: 'plugin',
  },
  'env-container-id': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_CONTAINERID',
    when: 'not [A-Za-z0-9][A-Za-z0-9_.-]*',
    by: 'plugin',
  },
  'env-ifname': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_IFNAME',
    when: 'not a valid Linux interface name',
    by: 'plugin',
  },
  'env-netns': {
    code: CniCode.InvalidEnv,
    msg: 'invalid CNI_NETNS',
    when: "not an absolute path without whitespace or quotes, or the node's own namespace",
    by: 'plugin',
  },
  // ---- 5: I/O failure
  'netns-missing': {
    code: CniCode.IoFailure,
    msg: 'netns {netns} does not exist',
    when: 'ADD: CNI_NETNS cannot be opened',
    by: 'plugin',
  },
  'wire-failed': {
    code: CniCode.IoFailure,
    msg: 'failed to wire {ifName} in netns {netns}',
    when: 'ADD: the kernel refused part of the wiring (then the IP is given back)',
    by: 'plugin',
  },
  'add-rolled-back': {
    code: CniCode.IoFailure,
    msg: 'ADD failed after the IP was assigned; the IP and the wiring were given back',
    when: 'ADD: any other failure after the assignment',
    by: 'plugin',
  },
  'del-veth': {
    code: CniCode.IoFailure,
    msg: 'failed to delete host veth {veth}',
    when: 'DEL: the host veth exists but cannot be deleted',
    by: 'plugin',
  },
  'gc-veth': {
    code: CniCode.IoFailure,
    msg: 'GC released {released} IPs but could not remove {failed} host veths',
    when: 'GC: host veths left behind',
    by: 'plugin',
  },
  'check-node-state': {
    code: CniCode.IoFailure,
    msg: 'cannot read the node network state',
    when: 'CHECK: the node side cannot be read',
    by: 'plugin',
  },
  internal: {
    code: CniCode.IoFailure,
    msg: 'internal error',
    when: 'an unexpected exception (a bug); details carry it',
    by: 'plugin',
  },
  // ---- 6: decode failure, 7: invalid network config
  decode: {
    code: CniCode.DecodeFailure,
    msg: 'failed to decode the network configuration',
    when: 'stdin is not a JSON object, or nests too deep',
    by: 'plugin',
  },
  'config-invalid': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'invalid network configuration',
    when: 'a field of the config is missing or wrong (details name it)',
    by: 'plugin',
  },
  'add-family': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'this node serves {served}, the network config asks for ipFamily {asked}',
    when: 'ADD: the config asks for an IP family the node does not serve (the address, if any, is given back)',
    by: 'plugin',
  },
  'egress-ifname': {
    code: CniCode.InvalidEnv,
    msg: 'CNI_IFNAME {ifName} is the IPv4 egress interface of IPv6 pods',
    when: 'ADD on an IPv6 node with CNI_IFNAME v4if0',
    by: 'plugin',
  },
  'gc-attachments': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'GC needs cni.dev/valid-attachments',
    when: 'GC without the list',
    by: 'plugin',
  },
  'gc-attachment': {
    code: CniCode.InvalidNetworkConfig,
    msg: 'invalid {key}[{index}]',
    when: 'GC: an entry of the list is malformed',
    by: 'plugin',
  },
  'check-prev-result': {
    code: CniCode.InvalidNetworkConfig,
    msg: '{problem}',
    when: "CHECK: prevResult missing or without this interface's address (IPv4 or IPv6)",
    by: 'plugin',
  },
  // ---- 11: try again later
  'ipamd-unreachable': {
    code: CniCode.TryAgainLater,
    msg: 'cannot reach ipamd, try again later',
    when: "ADD: ipamd's socket does not answer",
    by: 'plugin',
  },
  'add-checkpoint': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd could not write its checkpoint (disk full or failing?), try again later',
    when: 'ADD: the assignment could not be made durable; it was undone',
    by: 'plugin',
  },
  'ipamd-restarting': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd is shutting down or restarting, try again later',
    when: 'ADD arrives or is in flight while ipamd stops',
    by: 'plugin',
  },
  'add-unverified': {
    code: CniCode.TryAgainLater,
    msg: 'no free IP while addresses are held unverified; run `eni-ipam audit` on the node, then try again',
    when: 'ADD: no free address while the checkpoint was rejected or evidence is unread (details: how many, why)',
    by: 'plugin',
  },
  'add-throttled': {
    code: CniCode.TryAgainLater,
    msg: 'no free IP: EC2 is throttling ipamd, try again later',
    when: 'ADD: the pool is empty and EC2 answers RequestLimitExceeded',
    by: 'plugin',
  },
  'add-not-ready': {
    code: CniCode.TryAgainLater,
    msg: 'the IP restored for this container is not yet visible on an ENI, try again later',
    when: 'ADD right after a restart, before IMDS/EC2 show the restored address',
    by: 'plugin',
  },
  'add-no-ip': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd cannot assign an IP now, try again later',
    when: 'ADD: no free address within the wait (details: the binding limit)',
    by: 'plugin',
  },
  'ipamd-transient': {
    code: CniCode.TryAgainLater,
    msg: 'ipamd cannot serve this request now, try again later',
    when: 'ADD: any other retryable gRPC status, or the connection dropped before the answer (the Node plugin, ipamd killed mid-request: outcome unknown, never run twice)',
    by: 'plugin',
  },
  'ip-conflict': {
    code: CniCode.TryAgainLater,
    msg: "IP {ip} is already in use on this node: it is routed to {device} (another pod's veth)",
    when: 'ADD: the node already routes the IP to another pod; ipamd quarantines it',
    by: 'plugin',
  },
  'check-ipamd-down': {
    code: CniCode.TryAgainLater,
    msg: 'cannot reach ipamd to verify the allocation, try again later',
    when: 'CHECK: ipamd unavailable',
    by: 'plugin',
  },
  'gc-ipamd-down': {
    code: CniCode.TryAgainLater,
    msg: 'cannot reach ipamd for GC, try again later',
    when: 'GC: ipamd unavailable',
    by: 'plugin',
  },
  // ---- 50/51: STATUS
  'status-unreachable': {
    code: CniCode.PluginNotAvailable,
    msg: 'ipamd is not available on {socket}',
    when: 'STATUS: ipamd does not answer',
    by: 'plugin',
  },
  'status-cannot-serve': {
    code: CniCode.PluginNotAvailable,
    msg: '{reason}',
    when: 'STATUS: ipamd cannot serve an IP now',
    by: 'plugin',
  },
  'status-limited': {
    code: CniCode.PluginNotAvailableLimitedConnectivity,
    msg: '{reason}',
    when: 'STATUS: ipamd cannot serve, and existing pods may have limited connectivity',
    by: 'plugin',
  },
  // ---- 100: ours
  'ipamd-refused': {
    code: CniCode.IpamdError,
    msg: 'ipamd refused the request',
    when: 'ADD: ipamd failed it for a reason a retry does not cure (details say why)',
    by: 'plugin',
  },
  'ipamd-skew': {
    code: CniCode.IpamdError,
    msg: 'ipamd refused the request (plugin/ipamd API version skew?)',
    when: 'ADD: plugin and ipamd speak different API versions',
    by: 'plugin',
  },
  'add-no-ipv4': {
    code: CniCode.IpamdError,
    msg: 'ipamd did not assign an IPv4 address',
    when: 'ADD: ipamd answered without an address',
    by: 'plugin',
  },
  'add-no-address': {
    code: CniCode.IpamdError,
    msg: 'ipamd serving {mode} did not assign {missing}',
    when: 'ADD: an IPv6 or dual-stack answer without every address of its mode (dual: both, never one)',
    by: 'plugin',
  },
  'add-unknown-family': {
    code: CniCode.IpamdError,
    msg: 'ipamd serves IP family {mode}, which this plugin does not know (plugin/ipamd version skew?)',
    when: 'ADD: a newer ipamd names a mode this plugin cannot wire',
    by: 'plugin',
  },
  'check-refused': {
    code: CniCode.IpamdError,
    msg: 'ipamd refused CHECK',
    when: 'CHECK: ipamd failed it',
    by: 'plugin',
  },
  'gc-refused': { code: CniCode.IpamdError, msg: 'ipamd refused GC', when: 'GC: ipamd failed it', by: 'plugin' },
  'check-netns': {
    code: CniCode.CheckFailed,
    msg: 'cannot read netns {netns}',
    when: 'CHECK: the pod netns cannot be read',
    by: 'plugin',
  },
  'check-drift': {
    code: CniCode.CheckFailed,
    msg: '{problems}',
    when: 'CHECK: the attachment differs from prevResult',
    by: 'plugin',
  },
} as const satisfies Record<string, CniErrorEntry>;

/** The catalogue, by id: the plugin's entries and the shim's (shim-errors.ts). */
export const CNI_ERRORS = { ...PLUGIN_ERRORS, ...SHIM_ERRORS } as const;

/** An id of {@link CNI_ERRORS}. */
export type CniErrorId = keyof typeof CNI_ERRORS;

/**
 * The {@link CniError} of catalogue entry `id`: its code, its `msg` with each `{name}`
 * replaced by `vars[name]`, and `details`.
 * @throws Error (a bug) when `msg` names a value `vars` lacks.
 */
export function cniError(id: CniErrorId, details = '', vars: Readonly<Record<string, string | number>> = {}): CniError {
  const e: CniErrorEntry = CNI_ERRORS[id];
  const msg = e.msg.replace(/\{(\w+)\}/g, (_, k: string) => {
    const v = vars[k];
    if (v === undefined) throw new Error(`cniError(${id}): no value for {${k}}`);
    return String(v);
  });
  return new CniError(e.code, msg, details);
}

/** The docs table of every entry (markdown), in catalogue order: code, who, msg, when. */
export function renderCniErrorTable(): string {
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const rows = Object.entries(CNI_ERRORS as Record<string, CniErrorEntry>)
    .sort(([, a], [, b]) => a.code - b.code || (a.by === b.by ? 0 : a.by === 'plugin' ? -1 : 1))
    .map(([id, e]) => `| ${e.code} | ${e.by} | \`${id}\` | ${esc(e.msg)} | ${esc(e.when)} |`);
  return ['| code | by | id | msg | when |', '|---|---|---|---|---|', ...rows].join('\n');
}
