/**
 * The CNI protocol's environment (CNI spec, "Parameters"): CNI_COMMAND, CNI_CONTAINERID,
 * CNI_NETNS, CNI_IFNAME, CNI_ARGS and CNI_PATH. Errors are {@link CniError} code 4
 * (invalid necessary environment variables).
 */
import { echo } from './errors.js';
import { cniError } from './error-catalogue.js';
import { ifNameError } from './veth-name.js';

/** The Kubernetes keys containerd / CRI-O put in CNI_ARGS (in any order). */
export interface K8sArgs {
  /** `K8S_POD_NAME` ('' when absent). */
  podName: string;
  /** `K8S_POD_NAMESPACE` ('' when absent). */
  podNamespace: string;
  /** `K8S_POD_INFRA_CONTAINER_ID` ('' when absent). */
  podInfraContainerId: string;
  /** `K8S_POD_UID` ('' when absent). */
  podUid: string;
}

/** Parsed CNI_ARGS. */
export interface CniArgs extends K8sArgs {
  /** `IgnoreUnknown=1|true`: unknown keys are tolerated instead of refused. */
  ignoreUnknown: boolean;
}

/** The parsed CNI environment. Strings are '' when the variable is unset. */
export interface CniEnv {
  command: string;
  containerId: string;
  /** Path of the network namespace: `/var/run/netns/<name>` or `/proc/<pid>/ns/net`. */
  netns: string;
  ifName: string;
  args: CniArgs;
  /** CNI_PATH split on ':' (empty entries dropped). */
  path: string[];
}

const KNOWN: Record<string, keyof K8sArgs> = {
  K8S_POD_NAME: 'podName',
  K8S_POD_NAMESPACE: 'podNamespace',
  K8S_POD_INFRA_CONTAINER_ID: 'podInfraContainerId',
  K8S_POD_UID: 'podUid',
};

/** C0 controls and DEL: never part of a Kubernetes name, a UID or a container id. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

function parseBool(key: string, v: string): boolean {
  if (/^(1|true)$/i.test(v)) return true;
  if (/^(0|false)$/i.test(v)) return false;
  throw cniError('env-args', `${key}=${echo(v)}: expected 1, 0, true or false`);
}

/**
 * Parses CNI_ARGS (`KEY=VALUE;KEY=VALUE`, keys in any order; a value may contain '=').
 * Unknown keys are refused unless `IgnoreUnknown` is true anywhere in the string.
 * @throws CniError code 4 for a pair without '=', an empty or repeated key, an unknown key,
 *   or a key or value holding a control character (U+0000-U+001F, U+007F; e.g. a newline in
 *   K8S_POD_NAMESPACE), naming the key: refused rather than dropped, so a pod's identity is
 *   never silently lost (docs/design.md#cni-errors).
 */
export function parseCniArgs(raw: string): CniArgs {
  const out: CniArgs = { ignoreUnknown: false, podName: '', podNamespace: '', podInfraContainerId: '', podUid: '' };
  const unknown: string[] = [];
  const seen = new Set<string>();
  for (const pair of raw.split(';')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) throw cniError('env-args', `${echo(pair)} is not KEY=VALUE`);
    const key = pair.slice(0, eq);
    const value = pair.slice(eq + 1);
    if (CONTROL.test(pair))
      throw cniError(
        'env-args-control',
        `${echo(key)}=${echo(value)}: control characters are not allowed in CNI_ARGS`,
        {
          key: echo(key),
        },
      );
    if (seen.has(key)) throw cniError('env-args', `key ${echo(key)} given twice`);
    seen.add(key);
    if (key === 'IgnoreUnknown') out.ignoreUnknown = parseBool(key, value);
    else if (KNOWN[key]) out[KNOWN[key]] = value;
    else unknown.push(key);
  }
  if (unknown.length > 0 && !out.ignoreUnknown) {
    throw cniError(
      'env-args',
      `unknown keys ${unknown.slice(0, 8).map(echo).join(', ')}${unknown.length > 8 ? ` and ${unknown.length - 8} more` : ''} (set IgnoreUnknown=1 to allow them)`,
    );
  }
  return out;
}

/**
 * Reads the CNI environment. Only CNI_ARGS is checked here (it is parsed); which other
 * variables are required depends on the verb: see {@link requireEnv}.
 * @throws CniError code 4 for a malformed CNI_ARGS.
 */
export function readCniEnv(env: Readonly<Record<string, string | undefined>>): CniEnv {
  return {
    command: env.CNI_COMMAND ?? '',
    containerId: env.CNI_CONTAINERID ?? '',
    netns: env.CNI_NETNS ?? '',
    ifName: env.CNI_IFNAME ?? '',
    args: parseCniArgs(env.CNI_ARGS ?? ''),
    path: (env.CNI_PATH ?? '').split(':').filter((p) => p !== ''),
  };
}

/**
 * Checks the variables a verb needs (CNI spec: ADD and CHECK need CNI_CONTAINERID, CNI_NETNS,
 * CNI_IFNAME; DEL needs CNI_CONTAINERID and CNI_IFNAME, CNI_NETNS may be empty), and their
 * shapes: container id `[A-Za-z0-9][A-Za-z0-9_.-]*`, ifname a valid Linux interface
 * name, netns an absolute path without whitespace or quotes (it goes into `ip -batch`).
 * @throws CniError code 4 naming the missing or malformed variable.
 */
export function requireEnv(e: CniEnv, verb: 'ADD' | 'DEL' | 'CHECK'): void {
  const missing: string[] = [];
  if (!e.containerId) missing.push('CNI_CONTAINERID');
  if (verb !== 'DEL' && !e.netns) missing.push('CNI_NETNS');
  if (!e.ifName) missing.push('CNI_IFNAME');
  if (missing.length > 0)
    throw cniError('env-missing', `required for CNI_COMMAND=${verb}`, { vars: missing.join(', ') });
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(e.containerId)) {
    throw cniError('env-container-id', `${echo(e.containerId)}: expected [A-Za-z0-9][A-Za-z0-9_.-]*`);
  }
  const ifErr = ifNameError(e.ifName);
  if (ifErr) throw cniError('env-ifname', ifErr);
  if (e.netns && !/^\/[^\s"'\\]*$/.test(e.netns)) {
    throw cniError('env-netns', `${echo(e.netns)} is not an absolute path without whitespace or quotes`);
  }
}
