/**
 * `eni-ipam version`: this CLI's version and Node.js version, and the running ipamd's, read
 * from its metrics (`awscni_build_info{version,nodeversion}`; docs/configuration.md).
 */
import type { CommandModule } from 'yargs';
import { buildInfo, versionLine, type BuildInfo } from '../../ipamd/version.js';
import { CliError, EXIT } from '../errors.js';
import { httpGet } from '../ipamd-api.js';
import { globalOptions } from '../options.js';
import { print, printJson } from '../output.js';

/**
 * The build of the ipamd whose metrics text is `text`, from its `awscni_build_info` series.
 * @throws CliError incomplete (5) when the series is missing or has no version label.
 */
export function ipamdBuild(text: string): BuildInfo {
  const line = text.split('\n').find((l) => l.startsWith('awscni_build_info{'));
  const label = (n: string) => (line ? new RegExp(`[{,]${n}="([^"]*)"`).exec(line)?.[1] : undefined);
  const version = label('version');
  if (!version) throw new CliError('ipamd metrics have no awscni_build_info{version=...} series', EXIT.incomplete);
  return { version, node: label('nodeversion') || 'unknown' };
}

/** `version`: prints both lines (json: `{cli, ipamd}`); exit 3 after the CLI's line when ipamd is unreachable. */
export const versionCommand: CommandModule = {
  command: 'version',
  describe: "this CLI's version and the running ipamd's (from its metrics)",
  handler: async (argv) => {
    const cli = buildInfo();
    const o = globalOptions(argv);
    let ipamd: BuildInfo | CliError;
    try {
      ipamd = ipamdBuild(await httpGet(o.metrics, '/metrics', o.timeoutMs, 'ipamd metrics'));
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      ipamd = e;
    }
    if (argv.output === 'json') printJson({ cli, ipamd: ipamd instanceof CliError ? null : ipamd });
    else print(versionLine('eni-ipam', cli));
    if (ipamd instanceof CliError) throw ipamd;
    if (argv.output !== 'json') print(versionLine('eni-ipamd', ipamd));
  },
};
