/**
 * `eni-ipam support-bundle`: one .tar.gz (node-tar) with ipamd's logs, the checkpoint,
 * introspection, metrics, ip rules/routes/links/neighbours, iptables-save, the CRI
 * sandboxes and the redacted environment, plus MANIFEST.json saying what could not be
 * collected. Made even when ipamd is down (that is when it is needed most).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { CommandModule } from 'yargs';
import { CliError, EXIT, systemError } from '../errors.js';
import { globalOptions } from '../options.js';
import { print, emit } from '../output.js';

/** Default log files: aws-node's log directory and ours, when present. */
const DEFAULT_LOG_DIRS = ['/var/log/aws-routed-eni', '/var/log/eni-ipam'];

async function defaultLogs(): Promise<string[]> {
  const out: string[] = [];
  for (const d of DEFAULT_LOG_DIRS) {
    if (!existsSync(d)) continue;
    for (const f of await readdir(d).catch(() => [])) out.push(path.join(d, f));
  }
  return out;
}

/** `support-bundle`: writes the tarball (exit 0 even when parts are missing; they are listed). */
export const supportBundleCommand: CommandModule = {
  command: 'support-bundle',
  describe: 'one tarball: logs, checkpoint, introspection, metrics, kernel, iptables, CRI, env',
  builder: (y) =>
    y
      .option('out', { type: 'string', describe: 'tarball path (default ./eni-ipam-support-<host>-<time>.tar.gz)' })
      .option('log', {
        type: 'array',
        string: true,
        describe: `ipamd log files (default: files in ${DEFAULT_LOG_DIRS.join(', ')})`,
      }),
  handler: async (argv) => {
    const o = globalOptions(argv);
    const [{ collectBundle }, tar] = await Promise.all([import('../bundle.js'), import('tar')]);
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const name = `eni-ipam-support-${os.hostname()}-${stamp}`;
    const out = path.resolve(argv.out ? String(argv.out) : `${name}.tar.gz`);
    const logs = Array.isArray(argv.log) ? argv.log.map(String) : await defaultLogs();
    const work = await mkdtemp(path.join(os.tmpdir(), 'eni-ipam-bundle-'));
    try {
      const root = path.join(work, name);
      const parts = await collectBundle(o, root, logs);
      await writeFile(
        path.join(root, 'MANIFEST.json'),
        JSON.stringify({ createdAt: new Date().toISOString(), options: o, parts }, null, 1),
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
