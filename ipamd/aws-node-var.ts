/**
 * The shape of one row of the aws-node table (aws-node-vars.ts): an environment variable
 * amazon-vpc-cni-k8s's aws-node reads, and what eni-ipam does with it
 * (docs/configuration.md#every-aws-node-setting). No I/O.
 */
import { anyCase, chartString, type JsonSchema } from './config-chart-types.js';

/**
 * What eni-ipam does with an aws-node variable:
 * - `honoured`: read with the same meaning (its row in the config spec says how);
 * - `refused`: a value that asks for something eni-ipam does not do stops ipamd at start
 *   with one line naming the variable, why, and the accepted values (the `quiet` ones);
 * - `warned`: harmless to ignore; a value other than the `quiet` ones logs one warning.
 */
export type Verdict = 'honoured' | 'refused' | 'warned';

/** One aws-node variable (see the module docstring). Defaults and meanings are upstream's. */
export interface AwsNodeVar {
  name: string;
  /** The aws-node part that reads it upstream: ipamd, entrypoint (cmd/aws-vpc-cni), init (cmd/aws-vpc-cni-init), plugin. */
  readBy: string;
  /** Upstream's default, as aws-node's docs and chart give it ('unset' when none). */
  upstreamDefault: string;
  /** What it means in aws-node, one sentence. */
  upstreamMeaning: string;
  verdict: Verdict;
  /**
   * refused/warned: the values (trimmed, compared in lower case) that ask for what eni-ipam
   * does anyway, accepted without a word; for refused ones, the values accepted.
   */
  quiet?: readonly string[];
  /** refused/warned: why, completing "is refused: …" or "is ignored: …"; honoured: how eni-ipam reads it, when it differs. */
  note?: string;
  /** honoured by a change not in this tree yet: ipamd reads it once that lands (named here). */
  landing?: string;
  /** The chart's typing of a variable the config spec does not hold (refused/warned rows derive theirs). */
  chart?: JsonSchema;
}

/** strconv.ParseBool's false and true spellings (what aws-node accepts), lower case. */
export const FALSE = ['false', '0', 'f'] as const;
export const TRUE = ['true', '1', 't'] as const;

/** The chart schema of a refused row: only its quiet values (booleans as YAML booleans too). */
export function chartOfQuiet(quiet: readonly string[]): JsonSchema {
  const text = chartString(quiet.map(anyCase).join('|'), { description: `accepted: ${quiet.join(', ')}` });
  const bools = [...(quiet.includes('false') ? [false] : []), ...(quiet.includes('true') ? [true] : [])];
  const ints = quiet.filter((q) => q === '0' || q === '1').map(Number);
  return {
    anyOf: [
      ...(bools.length ? [{ type: 'boolean', enum: bools }] : []),
      ...(ints.length ? [{ type: 'integer', enum: ints }] : []),
      text,
    ],
  };
}

/** The chart schema of a warned row: any scalar (ipamd logs one warning and goes on). */
export const CHART_ANY: JsonSchema = { type: ['string', 'number', 'boolean'] };

/** A row honoured through the config spec (meaning and typing come from there). */
export const honoured = (
  name: string,
  readBy: string,
  upstreamDefault: string,
  upstreamMeaning: string,
  note?: string,
): AwsNodeVar => ({ name, readBy, upstreamDefault, upstreamMeaning, verdict: 'honoured', ...(note ? { note } : {}) });

/** A refused row: `quiet` are the accepted values, `note` why the others are refused. */
export const refused = (
  name: string,
  readBy: string,
  upstreamDefault: string,
  upstreamMeaning: string,
  quiet: readonly string[],
  note: string,
): AwsNodeVar => ({ name, readBy, upstreamDefault, upstreamMeaning, verdict: 'refused', quiet, note });

/** A warned row: `quiet` values pass silently, others log one warning saying `note`. */
export const warned = (
  name: string,
  readBy: string,
  upstreamDefault: string,
  upstreamMeaning: string,
  quiet: readonly string[],
  note: string,
): AwsNodeVar => ({ name, readBy, upstreamDefault, upstreamMeaning, verdict: 'warned', quiet, note });
