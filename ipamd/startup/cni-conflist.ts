/**
 * The plugins chained after eni-ipam in the conflist ipamd installs, and the operator's
 * own conflist when one is given (docs/design.md#chained-plugins).
 *
 * Default list: eni-ipam, then `portmap` (hostPort: `capabilities.portMappings`, `snat`
 * for hairpin and node-local clients, as amazon-vpc-cni-k8s's 10-aws.conflist), then
 * `bandwidth` (`capabilities.bandwidth`: the kubernetes.io/ingress-bandwidth and
 * egress-bandwidth pod annotations) when ENABLE_BANDWIDTH_PLUGIN=true (as in aws-node).
 * portmap is chained only when the bin dir holds it (the chart's init container installs
 * it from the image), so the conflist never names a plugin the runtime cannot find: every
 * ADD on the node would fail. bandwidth was asked for, so its absence is an error.
 *
 * A custom conflist (ENI_IPAM_CNI_CONFLIST_FILE; the chart's cniConfig.fileContents) is
 * installed as written, except that ipamd writes the fields of the eni-ipam entry it owns
 * (sockets, MTU, veth prefix, log file, wait): a field set there to another value is
 * refused, since the plugin and ipamd must agree on them. It is checked at start, before
 * ipamd opens anything, and again at install before a file is written: the node's
 * working conflist stays in place when it is refused.
 */
import { readFileSync } from 'node:fs';
import { SUPPORTED_VERSIONS } from '../../cni-plugin/facade.js';

type Obj = Record<string, unknown>;

/** The portmap entry (containernetworking/plugins `portmap`; field names as aws-node's conflist). */
export const PORTMAP_PLUGIN: Readonly<Obj> = Object.freeze({
  type: 'portmap',
  capabilities: { portMappings: true },
  snat: true,
});

/** The bandwidth entry (containernetworking/plugins `bandwidth`; as aws-node with ENABLE_BANDWIDTH_PLUGIN). */
export const BANDWIDTH_PLUGIN: Readonly<Obj> = Object.freeze({ type: 'bandwidth', capabilities: { bandwidth: true } });

/** A custom conflist that cannot be installed; the message is one line naming the file and why. */
export class CustomConflistError extends Error {
  override name = 'CustomConflistError';
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses and checks a custom conflist: valid JSON; an object with a supported string
 * `cniVersion` and a non-empty `plugins` array of objects, each with a `type` that is a
 * plain file name; exactly one plugin of type `eni-ipam`.
 * @param text the file's contents. @param source names the file in the error.
 * @returns the parsed document.
 * @throws CustomConflistError (one line: `source`, then what is wrong).
 */
export function parseCustomConflist(text: string, source: string): Obj {
  const bad = (why: string): never => {
    throw new CustomConflistError(`custom conflist ${source} is refused: ${why}`);
  };
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return bad(`not valid JSON (${(e as Error).message})`);
  }
  if (!isObj(doc) || !Array.isArray(doc.plugins) || doc.plugins.length === 0)
    return bad('expected a CNI network configuration list: an object with a non-empty "plugins" array');
  if (!SUPPORTED_VERSIONS.includes(doc.cniVersion as string))
    bad(`cniVersion ${JSON.stringify(doc.cniVersion)} is not one of ${SUPPORTED_VERSIONS.join(', ')}`);
  if (doc.name !== undefined && (typeof doc.name !== 'string' || doc.name === ''))
    bad('"name" must be a non-empty string');
  let ours = 0;
  for (const [i, p] of (doc.plugins as unknown[]).entries()) {
    if (!isObj(p) || typeof p.type !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(p.type))
      bad(`plugins[${i}] needs a "type" naming an executable in the CNI bin dir (letters, digits, . _ -)`);
    if ((p as Obj).type === 'eni-ipam') ours++;
  }
  if (ours !== 1) bad(ours === 0 ? 'it names no eni-ipam plugin' : `it names the eni-ipam plugin ${ours} times`);
  return doc;
}

/**
 * Reads `file` and checks it with {@link parseCustomConflist}.
 * @throws CustomConflistError when it cannot be read or is refused.
 */
export function readCustomConflist(file: string): Obj {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new CustomConflistError(`custom conflist ${file} cannot be read: ${(e as Error).message}`);
  }
  return parseCustomConflist(text, file);
}

/** Which env var sets each field ipamd writes into the eni-ipam entry (named when a custom conflist disagrees). */
const OWNED_FIELDS: Record<string, string> = {
  mtu: 'POD_MTU / AWS_VPC_ENI_MTU',
  vethPrefix: 'AWS_VPC_K8S_CNI_VETHPREFIX',
  ipamdSocket: 'ENI_IPAM_SOCKET',
  execSocket: 'ENI_IPAM_CNI_EXEC_SOCKET',
  ipamdWaitSeconds: 'ENI_IPAM_CNI_IPAMD_WAIT',
  logFile: 'AWS_VPC_K8S_PLUGIN_LOG_FILE',
  nodePlugin: 'ENI_IPAM_CNI_EXEC',
  ipFamily: 'ENABLE_IPv6 / ENABLE_IPv4',
};

/**
 * The custom conflist `custom` with its eni-ipam entry completed by `ours` (the entry
 * ipamd would write) and `name` defaulted to `networkName`. Other plugins, their order
 * and every other field are kept as written.
 * @throws CustomConflistError when the eni-ipam entry sets an owned field to another value than ipamd's.
 */
export function completeCustomConflist(custom: Obj, ours: Obj, networkName: string, source: string): Obj {
  const plugins = (custom.plugins as Obj[]).map((p) => {
    if (p.type !== 'eni-ipam') return p;
    for (const [k, env] of Object.entries(OWNED_FIELDS)) {
      if (k in p && JSON.stringify(p[k]) !== JSON.stringify(ours[k]))
        throw new CustomConflistError(
          `custom conflist ${source} is refused: the eni-ipam plugin sets ${k}=${JSON.stringify(p[k])}, ` +
            `but ipamd writes ${k}=${JSON.stringify(ours[k] ?? null)} (set by ${env}); remove it from the file`,
        );
    }
    return { ...p, ...ours };
  });
  return { ...custom, name: custom.name ?? networkName, plugins };
}

/**
 * The plugins chained after eni-ipam in the default conflist.
 * @param has whether the bin dir holds an executable of that name.
 * @param bandwidth ENABLE_BANDWIDTH_PLUGIN.
 * @returns the entries, in chain order.
 * @throws Error when bandwidth is asked for but not in the bin dir.
 */
export function defaultChain(has: (name: string) => boolean, bandwidth: boolean, binDir: string): Obj[] {
  const out: Obj[] = [];
  if (has('portmap')) out.push({ ...PORTMAP_PLUGIN });
  if (bandwidth) {
    if (!has('bandwidth'))
      throw new Error(
        `ENABLE_BANDWIDTH_PLUGIN=true but ${binDir}/bandwidth is missing (the chart's init container installs it from the image); the conflist was not changed`,
      );
    out.push({ ...BANDWIDTH_PLUGIN });
  }
  return out;
}
