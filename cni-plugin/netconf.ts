/**
 * The network configuration the runtime writes on stdin (CNI spec, "Network
 * configuration" and "Plugin configuration objects"), validated with zod (`zod/mini`:
 * same checks, a fraction of the load time, which the plugin pays on every pod).
 *
 * Failures: stdin not JSON → code 6; `cniVersion` not supported → code 1; anything else
 * invalid → code 7. Unknown keys are kept (runtimes add e.g. `capabilities`, `args`).
 */
import * as z from 'zod/mini';
import { DEFAULT_IPAMD_SOCKET } from '../proto/ipam.js';
import { echo } from './errors.js';
import { cniError } from './error-catalogue.js';
import { isSupportedVersion, SUPPORTED_VERSIONS } from './versions.js';
import { vethPrefixError } from './veth-name.js';

/** Default pod MTU (AWS_VPC_ENI_MTU's default: jumbo frames inside a VPC). */
export const DEFAULT_MTU = 9001;
/** Default host veth prefix (AWS_VPC_K8S_CNI_VETHPREFIX's default). */
export const DEFAULT_VETH_PREFIX = 'eni';

const object = z.record(z.string(), z.unknown());

const schema = z.looseObject({
  cniVersion: z.string({ error: 'cniVersion must be a string' }),
  name: z
    .string({ error: 'name must be a string' })
    .check(
      z.regex(
        /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/,
        'name must start with a letter or digit and contain only letters, digits, "_", "." and "-"',
      ),
    ),
  type: z.string({ error: 'type must be a string' }).check(z.minLength(1, 'type must not be empty')),
  mtu: z._default(
    z
      .number({ error: 'mtu must be a number' })
      .check(z.int('mtu must be an integer'), z.gte(576, 'mtu must be >= 576'), z.lte(9001, 'mtu must be <= 9001')),
    DEFAULT_MTU,
  ),
  vethPrefix: z._default(
    z.string({ error: 'vethPrefix must be a string' }).check(
      z.refine((p) => vethPrefixError(p) === undefined, {
        error: (iss) => vethPrefixError(String(iss.input)) ?? 'invalid vethPrefix',
      }),
    ),
    DEFAULT_VETH_PREFIX,
  ),
  ipamdSocket: z._default(
    z.string({ error: 'ipamdSocket must be a string' }).check(z.regex(/^\//, 'ipamdSocket must be an absolute path')),
    DEFAULT_IPAMD_SOCKET,
  ),
  logFile: z.optional(
    z.string({ error: 'logFile must be a string' }).check(z.regex(/^\//, 'logFile must be an absolute path')),
  ),
  execSocket: z.optional(
    z
      .string({ error: 'execSocket must be a string' })
      .check(z.regex(/^(\/.*)?$/, 'execSocket must be an absolute path or empty')),
  ),
  ipamdWaitSeconds: z.optional(
    z
      .number({ error: 'ipamdWaitSeconds must be a number' })
      .check(z.gte(0, 'ipamdWaitSeconds must be >= 0'), z.lte(300, 'ipamdWaitSeconds must be <= 300')),
  ),
  nodePlugin: z.optional(
    z
      .string({ error: 'nodePlugin must be a string' })
      .check(z.regex(/^(\/.*)?$/, 'nodePlugin must be an absolute path or empty')),
  ),
  ipFamily: z._default(
    z.enum(['auto', 'ipv4', 'ipv6', 'dual'], { error: 'ipFamily must be one of auto, ipv4, ipv6, dual' }),
    'auto',
  ),
  prevResult: z.optional(z.record(z.string(), z.unknown(), { error: 'prevResult must be an object' })),
  runtimeConfig: z.optional(z.record(z.string(), z.unknown(), { error: 'runtimeConfig must be an object' })),
});

/** A validated network configuration, defaults applied. */
export interface NetConf {
  cniVersion: string;
  /** Network name: part of the allocation key at ipamd. */
  name: string;
  type: string;
  /** Pod interface and host veth MTU in bytes (default 9001, 576-9001). */
  mtu: number;
  /** Host veth name prefix, 1-4 characters (default `eni`). */
  vethPrefix: string;
  /** ipamd's Unix socket path (default `/var/run/eni-ipam/ipamd.sock`). */
  ipamdSocket: string;
  /** When set, one JSON line per invocation is appended to this file. */
  logFile?: string;
  /**
   * ipamd's CNI exec socket, read by the native shim only (cni-plugin/shim): absent = the
   * shim's default `/var/run/eni-ipam/cni-exec.sock`; '' = none (needs `nodePlugin`).
   */
  execSocket?: string;
  /**
   * Native shim only: how long (s, 0-300, default 10) an ADD waits for ipamd to serve
   * (a DaemonSet rolling update) before CNI error 11.
   */
  ipamdWaitSeconds?: number;
  /**
   * Native shim only (developer mode): absolute path of the Node plugin to exec when
   * ipamd cannot take the call. ipamd writes it only with ENI_IPAM_CNI_EXEC=false.
   */
  nodePlugin?: string;
  /**
   * The IP family this network's pods get (docs/design.md#ip-families): `auto` (default,
   * whatever ipamd serves), or `ipv4`, `ipv6`, `dual` to refuse (code 7 naming the mode)
   * an ADD on a node serving another. A known family also lets ADD wire the family's
   * routes while ipamd answers.
   */
  ipFamily: 'auto' | 'ipv4' | 'ipv6' | 'dual';
  /** The previous result (DEL, CHECK), as the runtime sent it. */
  prevResult?: Record<string, unknown>;
  /** Runtime-provided capability values. */
  runtimeConfig?: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * Deepest nesting of objects/arrays accepted on stdin. A real config with a chained
 * `prevResult` nests about 6 deep; anything deeper than this is refused before it is
 * parsed, because the result of ADD copies `prevResult` and serialising (or walking) a
 * 100,000-deep value overflows the stack after an IP was assigned.
 */
export const MAX_CONFIG_DEPTH = 64;

/**
 * The deepest `{`/`[` nesting of the JSON text `raw` (brackets inside strings ignored),
 * stopping as soon as it exceeds `limit`. Linear, no recursion, no allocation.
 */
export function jsonDepthExceeds(raw: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Decodes stdin as JSON; returns the object and its `cniVersion` if any, without
 * validating the rest (errors must be printed in the config's version when it has one).
 * @throws CniError code 6 if `raw` is not a JSON object, or nests objects/arrays deeper
 *   than {@link MAX_CONFIG_DEPTH} (refused before anything is allocated).
 */
export function decodeConfig(raw: string): Record<string, unknown> {
  if (jsonDepthExceeds(raw, MAX_CONFIG_DEPTH)) {
    throw cniError('decode', `objects/arrays nest deeper than ${MAX_CONFIG_DEPTH} levels`);
  }
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch (e) {
    throw cniError('decode', (e as Error).message);
  }
  const r = object.safeParse(v);
  if (!r.success || Array.isArray(v)) throw cniError('decode', 'stdin is not a JSON object');
  return r.data;
}

/**
 * Validates a decoded configuration and applies the defaults.
 * @throws CniError code 1 for a missing/unsupported `cniVersion` that is a string not in
 *   {@link SUPPORTED_VERSIONS}, code 7 for any other invalid field (details name each).
 */
export function validateConfig(obj: Record<string, unknown>): NetConf {
  if (typeof obj.cniVersion === 'string' && !isSupportedVersion(obj.cniVersion)) {
    throw cniError('version-unsupported', `supported: ${SUPPORTED_VERSIONS.join(', ')}`, {
      version: echo(obj.cniVersion),
    });
  }
  const r = schema.safeParse(obj);
  if (!r.success) {
    const details = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw cniError('config-invalid', details);
  }
  return r.data as NetConf;
}

/** {@link decodeConfig} then {@link validateConfig}. */
export function parseNetConf(raw: string): NetConf {
  return validateConfig(decodeConfig(raw));
}
