/**
 * Calls of the CNI shim tests (cni-shim*.test.ts): the shim or the Node plugin run on a
 * CniNode, the shim from another netns, and ipamd's count of the exec invocations it ran
 * (its log lines "CNI exec: invocation done").
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CniOutcome } from '../../kit/cni-exec.js';
import type { CniNode, VerbCall } from './cni-node.js';
import { pluginArgv } from './plugin-under-test.js';
import { waitFor } from '../../kit/wait.js';

/** A random 64-hex container id. */
export const newId = () => randomBytes(32).toString('hex');
/** Env var making the shim say when it execs the Node plugin. */
export const DEBUG = { ENI_IPAM_SHIM_DEBUG: '1' };
/** What the shim prints when it execs the Node plugin. */
export const FELL_BACK = /eni-ipam: running \S+eni-ipam\.cjs: /;

/** Runs `c` through the shim (with the fallback trace on) or the Node plugin. */
export const viaShim = (n: CniNode, c: VerbCall): Promise<CniOutcome> =>
  n.call({ ...c, plugin: pluginArgv('shim'), env: { ...DEBUG, ...c.env } });
export const viaNode = (n: CniNode, c: VerbCall): Promise<CniOutcome> => n.call({ ...c, plugin: pluginArgv('node') });

/** Invocations ipamd's exec server ran so far (from its log). */
export async function served(n: CniNode): Promise<number> {
  return (await readFile(path.join(n.h.dir, 'ipamd.log'), 'utf8'))
    .split('\n')
    .filter((l) => l.includes('"CNI exec: invocation done"')).length;
}

/** Waits until ipamd's log shows `count` exec invocations (its log is written asynchronously). */
export async function servedReaches(n: CniNode, count: number): Promise<number> {
  return waitFor(
    `ipamd logged ${count} exec invocations`,
    async () => {
      const s = await served(n);
      return s >= count ? s : undefined;
    },
    5000,
    50,
  );
}

/** The first IPv4 of a CNI result, without its prefix length. */
export const ipOf = (r: { ips: Array<{ address: string }> }): string => r.ips[0]!.address.split('/')[0]!;

/** Runs the shim inside the netns at `nodePath` instead of the node's (same config). */
export function viaShimIn(n: CniNode, nodePath: string, c: VerbCall): Promise<CniOutcome> {
  return n.call({ ...c, plugin: ['nsenter', `--net=${nodePath}`, ...pluginArgv('shim')], env: DEBUG });
}
