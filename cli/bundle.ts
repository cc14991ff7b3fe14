/**
 * The support bundle's contents: best effort, each part on its own (an ipamd that is
 * down still yields the kernel state, the checkpoint and the logs), each failure noted
 * in MANIFEST.json instead of stopping the bundle. The node's parts (CNI conflists, the
 * sysctls ipamd relies on, the kubelet's and containerd's logs) are ./bundle-node.ts. ipamd's settings come from ipamd
 * (introspection); cli-env.txt is the CLI's own environment. Environment values whose NAME
 * matches KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL (any case) are replaced by `<redacted>`.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { JOURNAL_SUFFIXES } from '../ipamd/checkpoint/journal.js';
import { CriSource, detectCriEndpoint } from '../ipamd/restore/cri-source.js';
import { collectNode, type BundlePart, type NodeSources } from './bundle-node.js';
import { httpGet } from './ipamd-api.js';
import type { GlobalOptions } from './options.js';

/** Names of environment variables whose values never enter a bundle. */
export const SECRET_NAME = /KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL/i;

/** `NAME=value` lines of `env`, sorted, secrets replaced by `<redacted>`. */
export function redactedEnv(env: NodeJS.ProcessEnv): string {
  return (
    Object.keys(env)
      .sort()
      .map((k) => `${k}=${SECRET_NAME.test(k) ? '<redacted>' : (env[k] ?? '')}`)
      .join('\n') + '\n'
  );
}

export type { BundlePart } from './bundle-node.js';

/** The kernel and firewall commands captured (argv after an optional nsenter). */
export const KERNEL_COMMANDS: Array<{ file: string; argv: string[] }> = [
  { file: 'kernel/ip-rule.txt', argv: ['ip', 'rule', 'show'] },
  { file: 'kernel/ip-route-all.txt', argv: ['ip', 'route', 'show', 'table', 'all'] },
  { file: 'kernel/ip-addr.txt', argv: ['ip', 'addr', 'show'] },
  { file: 'kernel/ip-link.txt', argv: ['ip', '-d', 'link', 'show'] },
  { file: 'kernel/ip-neigh.txt', argv: ['ip', 'neigh', 'show'] },
  { file: 'kernel/iptables-save.txt', argv: ['iptables-save'] },
];

/**
 * Writes every part under `dir` and returns what was collected, and where the node's parts
 * (conflists, runtime logs) were read from.
 * @param logs log files to include (missing ones are noted).
 * @param node where the node's facts are (./bundle-node.ts); its netns and deadline are `o`'s.
 */
export async function collectBundle(
  o: GlobalOptions,
  dir: string,
  logs: string[],
  node: Omit<NodeSources, 'netns' | 'timeoutMs'>,
): Promise<{ parts: BundlePart[]; node: Awaited<ReturnType<typeof collectNode>> }> {
  const parts: BundlePart[] = [];
  const put = async (file: string, produce: () => Promise<string | Buffer>) => {
    try {
      const body = await produce();
      await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await writeFile(path.join(dir, file), body);
      parts.push({ file, ok: true });
    } catch (e) {
      parts.push({ file, ok: false, error: ((e as Error).message ?? String(e)).split('\n')[0]! });
    }
  };
  await put('introspection/status.json', () => httpGet(o.introspection, '/v1/status', o.timeoutMs));
  await put('introspection/allocations.json', () => httpGet(o.introspection, '/v1/allocations', o.timeoutMs));
  // ipamd's effective settings, as ipamd itself reports them (upstream's introspection paths).
  for (const doc of ['ipamd-env-settings', 'networkutils-env-settings', 'enis'])
    await put(`introspection/${doc}.json`, () => httpGet(o.introspection, `/v1/${doc}`, o.timeoutMs));
  await put('metrics.txt', () => httpGet(o.metrics, '/metrics', o.timeoutMs, 'ipamd metrics'));
  await mkdir(path.join(dir, 'state'), { recursive: true });
  // The snapshot and its two journal files (the changes since it; ipamd/checkpoint/journal.ts),
  // journals first: a compaction empties a journal file only after the snapshot holding its
  // records is in place, so the snapshot copied after them is never older than they need.
  for (const file of [...JOURNAL_SUFFIXES.map((x) => `${o.checkpoint}${x}`), o.checkpoint]) {
    try {
      await copyFile(file, path.join(dir, 'state', path.basename(file)));
      parts.push({ file: `state/${path.basename(file)}`, ok: true });
    } catch (e) {
      if (file !== o.checkpoint && (e as NodeJS.ErrnoException).code === 'ENOENT') continue; // no journal: the snapshot is the whole state
      parts.push({ file: `state/${path.basename(file)}`, ok: false, error: (e as Error).message });
    }
  }
  const run = promisify(execFile);
  for (const c of KERNEL_COMMANDS) {
    const argv = o.netns ? ['nsenter', `--net=${o.netns}`, ...c.argv] : c.argv;
    await put(
      c.file,
      async () => (await run(argv[0]!, argv.slice(1), { timeout: o.timeoutMs, maxBuffer: 64 * 1024 * 1024 })).stdout,
    );
  }
  await put('cri/sandboxes.json', async () => {
    const src = new CriSource({
      endpoint: detectCriEndpoint(o.criEndpoint).endpoint,
      timeoutMs: Math.min(o.timeoutMs, 5000),
    });
    try {
      return JSON.stringify(await src.listReadySandboxes(), null, 1);
    } finally {
      src.close();
    }
  });
  // The shell eni-ipam ran in, NOT ipamd's (that is introspection/*-env-settings.json).
  await put('cli-env.txt', async () => redactedEnv(process.env));
  for (const [n, l] of logs.entries()) {
    const file = `logs/${n}-${path.basename(l)}`;
    await mkdir(path.join(dir, 'logs'), { recursive: true });
    try {
      await copyFile(l, path.join(dir, file));
      parts.push({ file, ok: true });
    } catch (e) {
      parts.push({ file, ok: false, error: (e as Error).message });
    }
  }
  const from = await collectNode(
    dir,
    { ...node, ...(o.netns ? { netns: o.netns } : {}), timeoutMs: o.timeoutMs },
    parts,
  );
  return { parts, node: from };
}
