#!/usr/bin/env node
/**
 * eni-ipam: the operator CLI (docs/design.md#14-operability item 5). Commands: status, pods, enis, audit,
 * plan, max-pods, support-bundle, version, completion. Parsing, help and shell completion are
 * yargs'; each command lives in ./commands/. Every expected failure prints ONE line
 * `eni-ipam: <what>` on stderr and exits with a code from ./errors.ts (EXIT); an
 * unexpected one prints one line too (the stack only with ENI_IPAM_DEBUG=1).
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { auditCommand } from './commands/audit.js';
import { maxPodsCommand } from './commands/max-pods.js';
import { planCommand } from './commands/plan.js';
import { enisCommand, podsCommand } from './commands/pods.js';
import { statusCommand } from './commands/status.js';
import { supportBundleCommand } from './commands/support-bundle.js';
import { versionCommand } from './commands/version.js';
import { CliError, EXIT } from './errors.js';
import { envDefaults, OUTPUT_FORMATS } from './options.js';

/** Prints `msg` as the one error line and exits with `code`. */
function die(msg: string, code: number): never {
  process.stderr.write(`eni-ipam: ${msg.trim().replace(/\s*\n\s*/g, ' ')}\n`);
  process.exit(code);
}

/** Runs the CLI on `argv` (without node and the script). */
export async function run(argv: string[]): Promise<void> {
  // The AWS SDK's Node version notice is not the operator's business in the middle of a report.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const d = envDefaults();
  const parser = yargs(argv)
    .scriptName('eni-ipam')
    .usage('$0 <command> [options]    operate eni-ipam on this node')
    .option('output', {
      alias: 'o',
      choices: OUTPUT_FORMATS,
      default: 'table',
      describe: 'output format (wide: enis one row per address)',
    })
    .option('introspection', {
      type: 'string',
      default: d.introspection,
      describe: "ipamd's introspection host:port (env INTROSPECTION_BIND_ADDRESS)",
    })
    .option('metrics', {
      type: 'string',
      default: d.metrics,
      describe: "ipamd's metrics host:port (env METRICS_BIND_ADDRESS)",
    })
    .option('socket', { type: 'string', default: d.socket, describe: "ipamd's gRPC Unix socket (env ENI_IPAM_SOCKET)" })
    .option('checkpoint', {
      type: 'string',
      default: d.checkpoint,
      describe: "ipamd's checkpoint file (env ENI_IPAM_CHECKPOINT_PATH)",
    })
    .option('cri-endpoint', {
      type: 'string',
      ...(d.criEndpoint ? { default: d.criEndpoint } : {}),
      describe: 'CRI socket (env CRI_RUNTIME_ENDPOINT; default: auto-detect as ipamd does)',
    })
    .option('netns', {
      type: 'string',
      ...(d.netns ? { default: d.netns } : {}),
      describe: "network namespace (path) holding the pods' host side (env ENI_IPAM_CNI_EXEC_NETNS; default: this one)",
    })
    .option('timeout', { type: 'string', default: '5000', describe: 'deadline of each read, ms' })
    .command(statusCommand)
    .command(podsCommand)
    .command(enisCommand)
    .command(auditCommand)
    .command(planCommand)
    .command(maxPodsCommand)
    .command(supportBundleCommand)
    .command(versionCommand)
    .completion('completion', 'print a bash/zsh completion script (eni-ipam completion >> ~/.bashrc)')
    .demandCommand(1, 'name a command')
    .strict()
    .recommendCommands()
    .epilogue(
      'Exit codes: 0 ok; 1 audit found mismatches; 2 usage (unknown command or flag, bad value,\nunknown instance type); 3 ipamd unreachable; 4 permission denied; 5 a source could not be\nread (incomplete answer).',
    )
    .wrap(Math.min(120, process.stdout.columns || 120))
    .help()
    .version(false)
    .fail((msg, err) => {
      if (err) throw err;
      // yargs' suggestion alone does not name what was typed, and it names `--no-x` as `x`.
      let named = /^Did you mean/.test(msg)
        ? `unknown command "${argv.find((a) => !a.startsWith('-')) ?? ''}". ${msg}`
        : msg;
      const unknown = /^Unknown arguments?: (.*)$/.exec(msg);
      if (unknown) {
        const typed = (n: string) =>
          argv.map((a) => a.split('=')[0]!).find((a) => a === `--${n}` || a === `--no-${n}` || a === `-${n}`);
        const names = unknown[1]!
          .split(', ')
          .filter((n) => !/[A-Z]/.test(n))
          .map((n) => typed(n) ?? n);
        named = `unknown ${names.every((n) => n.startsWith('-')) ? 'flag' : 'argument'}${names.length > 1 ? 's' : ''}: ${names.join(', ')}`;
      }
      die(named.includes('--help') ? named : `${named} (see eni-ipam --help)`, EXIT.usage);
    });
  await parser.parseAsync();
}

run(hideBin(process.argv)).catch((e: unknown) => {
  if (e instanceof CliError) die(e.message, e.code);
  const err = e as Error;
  if (process.env.ENI_IPAM_DEBUG === '1') process.stderr.write(`${err?.stack ?? String(e)}\n`);
  die(`unexpected error: ${err?.message ?? String(e)} (ENI_IPAM_DEBUG=1 shows the stack)`, EXIT.incomplete);
});
