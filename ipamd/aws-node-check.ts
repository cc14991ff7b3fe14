/**
 * The start-up check of the aws-node variables eni-ipam does not honour (aws-node-vars.ts):
 * a refused one set to a value that asks for what eni-ipam does not do stops ipamd with
 * one line naming it, why, and the accepted values; a warned one set to anything but its
 * quiet values, or the value aws-node's own DaemonSet gives it (aws-node-manifest.ts),
 * gives one warning line. Unset or empty is always fine, and so are upstream's
 * defaults (docs/configuration.md#every-aws-node-setting). Pure: env in, lines out.
 */
import { isAwsNodeDefault } from './aws-node-manifest.js';
import type { AwsNodeVar } from './aws-node-var.js';
import { AWS_NODE_VARS } from './aws-node-vars.js';
import { isBlank, trimBlank } from './config-patterns.js';
import { ConfigError, quoteValue } from './config-types.js';

/** The accepted values of a refused row, for its message (`unset` always included). */
export function acceptedValues(row: AwsNodeVar): string {
  const shown = (row.quiet ?? []).filter((q) => q !== '');
  return ['unset', ...shown].join(', ');
}

/**
 * Checks `env` against `rows` (default: the whole aws-node table).
 * @returns one warning line per warned variable set to a non-quiet value, in table order
 *   (`<VAR>="<value>" is ignored: <why>`).
 * @throws ConfigError `<VAR>="<value>" is refused: <why>; accepted: <values>` for the
 *   first refused variable set to a value outside its accepted ones.
 */
export function checkAwsNodeVars(env: NodeJS.ProcessEnv, rows: readonly AwsNodeVar[] = AWS_NODE_VARS): string[] {
  const warnings: string[] = [];
  for (const row of rows) {
    if (row.verdict === 'honoured') continue;
    const raw = env[row.name];
    if (raw === undefined || isBlank(raw)) continue;
    if ((row.quiet ?? []).includes(trimBlank(raw).toLowerCase())) continue;
    if (row.verdict === 'warned' && isAwsNodeDefault(row.name, raw)) continue;
    if (row.verdict === 'refused')
      throw new ConfigError(
        row.name,
        `${row.name}=${quoteValue(raw)} is refused: ${row.note}; accepted: ${acceptedValues(row)}`,
      );
    warnings.push(`${row.name}=${quoteValue(raw)} is ignored: ${row.note}`);
  }
  return warnings;
}
