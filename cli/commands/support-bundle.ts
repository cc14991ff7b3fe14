/**
 * `eni-ipam support-bundle`: one .tar.gz (node-tar) with ipamd's logs (the files its
 * settings name), the checkpoint, introspection (status, allocations, ENIs, and ipamd's
 * effective settings as ipamd reports them), metrics, ip rules/routes/links/neighbours,
 * iptables-save, the CRI sandboxes, the CNI conflists, the sysctls ipamd relies on, the
 * kubelet's and containerd's logs (cli/bundle-node.ts) and the CLI's own redacted
 * environment, plus MANIFEST.json saying where the log paths came from and what could not
 * be collected. Made even when ipamd is down (that is when it is needed most).
 */
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CommandModule } from 'yargs';
import { CliError, EXIT, systemError } from '../errors.js';
import { httpGet } from '../ipamd-api.js';
import { globalOptions } from '../options.js';
import { print, emit } from '../output.js';

/** Where aws-node and eni-ipam log when nothing else says (the chart's and upstream's directories). */
const DEFAULT_LOG_DIRS = ['/var/log/aws-routed-eni', '/host/var/log/aws-routed-eni', '/var/log/eni-ipam'];

/** ipamd's settings that name its log files (ipamd/observability/env-settings.ts, upstream's variable names). */
const LOG_SETTINGS = ['AWS_VPC_K8S_CNI_LOG_FILE', 'AWS_VPC_K8S_PLUGIN_LOG_FILE'] as const;

/** `file` and its rotated copies beside it (`<name>.1.gz`, `<name>.2.gz`…; ipamd/observability/log-files.ts). */
async function withRotated(file: string): Promise<string[]> {
  const dir = path.dirname(file);
  const base = path.basename(file);
  const rotated = (await readdir(dir).catch(() => [] as string[]))
    .filter((f) => f.startsWith(`${base}.`) && /^\.\d+(\.gz)?$/.test(f.slice(base.length)))
    .sort()
    .map((f) => path.join(dir, f));
  return [file, ...rotated];
}

/**
 * The log files to collect and where their paths came from: ipamd's own settings (its
 * introspection), else the same variables in this shell's environment, else every file in
 * the default directories.
 */
export async function configuredLogs(
  settings: Record<string, unknown> | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ files: string[]; from: string }> {
  const pick = (src: Record<string, unknown>) =>
    LOG_SETTINGS.map((k) => src[k])
      .filter((v): v is string => typeof v === 'string' && v.startsWith('/'))
      .filter((v, i, a) => a.indexOf(v) === i);
  const fromIpamd = settings ? pick(settings) : [];
  const fromEnv = pick(env);
  const chosen = settings ? fromIpamd : fromEnv;
  if (chosen.length > 0 || settings) {
    const files = (await Promise.all(chosen.map(withRotated))).flat();
    return {
      files,
      from: settings
        ? `ipamd's settings (${LOG_SETTINGS.join(', ')}${chosen.length === 0 ? ': stdout, no file' : ''})`
        : `this shell's ${LOG_SETTINGS.join(', ')} (ipamd unreachable)`,
    };
  }
  const files: string[] = [];
  for (const d of DEFAULT_LOG_DIRS) {
    if (!existsSync(d)) continue;
    for (const f of await readdir(d).catch(() => [])) files.push(path.join(d, f));
  }
  return {
    files,
    from: `every file in ${DEFAULT_LOG_DIRS.join(', ')} (ipamd unreachable, no log setting in this shell)`,
  };
}

/**
 * The CNI configuration directory to copy: `--cni-conf-dir`; else ipamd's
 * ENI_IPAM_CNI_CONF_DIR (its introspection) when that path exists here (it is a path as
 * ipamd's container sees it: right inside that container, and under a debug pod's /host as
 * the chart mounts it); else the host root's `/etc/cni/net.d`; else this shell's
 * ENI_IPAM_CNI_CONF_DIR; else `/etc/cni/net.d`.
 */
export function cniConfDir(
  a: { 'cni-conf-dir'?: unknown; 'host-root'?: unknown },
  settings: Record<string, unknown> | undefined,
  env: NodeJS.ProcessEnv = process.env,
): string {
  if (a['cni-conf-dir']) return path.resolve(String(a['cni-conf-dir']));
  const fromIpamd = settings?.ENI_IPAM_CNI_CONF_DIR;
  if (typeof fromIpamd === 'string' && fromIpamd.startsWith('/') && existsSync(fromIpamd)) return fromIpamd;
  if (a['host-root']) return path.join(String(a['host-root']), 'etc', 'cni', 'net.d');
  return env.ENI_IPAM_CNI_CONF_DIR || '/etc/cni/net.d';
}

/** `--host-root` when it names a directory. @throws CliError (usage) naming the flag otherwise. */
function hostRoot(v: unknown): string | undefined {
  if (v === undefined || v === '') return undefined;
  const dir = path.resolve(String(v));
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory())
    throw new CliError(
      `--host-root "${String(v)}" is not a directory: expected the node's root filesystem (e.g. /host in \`kubectl debug node/<node> --profile=sysadmin\`)`,
      EXIT.usage,
    );
  return dir;
}

/** `support-bundle`: writes the tarball (exit 0 even when parts are missing; they are listed). */
export const supportBundleCommand: CommandModule = {
  command: 'support-bundle',
  describe:
    'one tarball: logs, checkpoint, introspection, metrics, kernel, iptables, CRI, conflists, sysctls, kubelet and containerd logs, env',
  builder: (y) =>
    y
      .option('out', { type: 'string', describe: 'tarball path (default ./eni-ipam-support-<host>-<time>.tar.gz)' })
      .option('cni-conf-dir', {
        type: 'string',
        describe:
          "CNI configuration directory to copy (default: ipamd's ENI_IPAM_CNI_CONF_DIR where it exists here, else <host-root>/etc/cni/net.d, else /etc/cni/net.d)",
      })
      .option('host-root', {
        type: 'string',
        describe:
          "the node's root filesystem when run beside it (kubectl debug node/<node> --profile=sysadmin: /host): journalctl runs chrooted there",
      })
      .option('journal-dir', {
        type: 'string',
        describe:
          'a journal directory to read the kubelet and containerd units from (journalctl --directory; inside --host-root)',
      })
      .option('kubelet-log', {
        type: 'string',
        describe: "the kubelet's log file, when it does not log to the journal",
      })
      .option('containerd-log', {
        type: 'string',
        describe: "containerd's log file, when it does not log to the journal",
      })
      .option('log', {
        type: 'array',
        string: true,
        describe: `log files (default: ipamd's AWS_VPC_K8S_CNI_LOG_FILE and AWS_VPC_K8S_PLUGIN_LOG_FILE, from ipamd, with their rotated copies)`,
      }),
  handler: async (argv) => {
    const o = globalOptions(argv);
    const [{ collectBundle }, tar] = await Promise.all([import('../bundle.js'), import('tar')]);
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const name = `eni-ipam-support-${os.hostname()}-${stamp}`;
    const out = path.resolve(argv.out ? String(argv.out) : `${name}.tar.gz`);
    const settings = await httpGet(o.introspection, '/v1/ipamd-env-settings', o.timeoutMs).then(
      (t) => JSON.parse(t) as Record<string, unknown>,
      () => undefined,
    );
    const logs = Array.isArray(argv.log)
      ? { files: argv.log.map(String), from: '--log' }
      : await configuredLogs(settings);
    const root0 = hostRoot(argv['host-root']);
    const str = (k: string) => (argv[k] === undefined || argv[k] === '' ? undefined : path.resolve(String(argv[k])));
    const node = {
      cniConfDir: cniConfDir(argv as { 'cni-conf-dir'?: unknown; 'host-root'?: unknown }, settings),
      ...(root0 ? { hostRoot: root0 } : {}),
      ...(argv['journal-dir'] ? { journalDir: String(argv['journal-dir']) } : {}),
      ...(str('kubelet-log') ? { kubeletLog: str('kubelet-log')! } : {}),
      ...(str('containerd-log') ? { containerdLog: str('containerd-log')! } : {}),
    };
    const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-bundle-'));
    try {
      const root = path.join(work, name);
      const { parts, node: nodeFrom } = await collectBundle(o, root, logs.files, node);
      await writeFile(
        path.join(root, 'MANIFEST.json'),
        JSON.stringify(
          { createdAt: new Date().toISOString(), options: o, logsFrom: logs.from, node: nodeFrom, parts },
          null,
          1,
        ),
      );
      try {
        await tar.c({ gzip: true, file: out, cwd: work, portable: true }, [name]);
      } catch (e) {
        throw systemError(e, `the bundle ${out}`, EXIT.incomplete);
      }
      const missing = parts.filter((p) => !p.ok);
      if (o.output === 'json' || o.output === 'yaml') emit(o.output, { file: out, parts });
      else {
        print(`wrote ${out} (${parts.length - missing.length} of ${parts.length} parts)`);
        for (const m of missing) print(`  not collected: ${m.file}: ${m.error}`);
      }
    } finally {
      await rm(work, { recursive: true, force: true });
    }
    if (!existsSync(out)) throw new CliError(`the bundle ${out} was not written`, EXIT.incomplete);
  },
};
