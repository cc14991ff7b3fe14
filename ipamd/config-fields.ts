/**
 * zod builders for ipamd's environment variables: each turns the raw string into a
 * typed value, and on failure its issue message completes the sentence
 * `<VAR>="<value>" is invalid: <message>` (see `config.ts`). Each is tagged with its chart
 * typing (config-chart-types.ts): the chart's schema tests the same pattern
 * (config-patterns.ts) and says the same `accepts` phrase. No I/O.
 */
import { z } from 'zod';
import {
  anyOfSchemas,
  chartInteger,
  chartNumber,
  chartString,
  chartTyped,
  type JsonSchema,
} from './config-chart-types.js';
import {
  anyCase,
  commaList,
  decimalUpTo,
  HOST_NAME,
  IPV4,
  IPV4_CIDR,
  IPV6,
  PORT,
  splitList,
  trimBlank,
  uintPattern,
  wholeRegExp,
} from './config-patterns.js';

/** A schema from a raw env string to a typed value. */
export type Field<T> = z.ZodType<T, string>;

/** Adds a custom issue `message` about `input` to a transform's context and returns z.NEVER (the transform fails). */
export const fail = (
  ctx: { addIssue: (i: { code: 'custom'; message: string; input: unknown }) => void },
  input: string,
  message: string,
): typeof z.NEVER => {
  ctx.addIssue({ code: 'custom', message, input });
  return z.NEVER;
};

/** How a {@link patterned} field reads, refuses and is typed in the chart. */
export interface Patterned<T> {
  /** The pattern of the value (config-patterns.ts), without blanks around it. */
  body: string;
  /** What is accepted (the refusal says `expected <accepts>`). */
  accepts: string;
  /** The value of a matching string, blanks around it removed. */
  read: (s: string) => T;
  /** Chart values other than strings that render into an accepted value (YAML numbers, booleans). */
  nonString?: JsonSchema[];
  /** A pattern (anchored) of matching values that are still refused (`eth` as a veth prefix). */
  not?: string;
  /** More detail for a refused value, said before `expected …`, or undefined. */
  detail?: (s: string) => string | undefined;
}

/**
 * A field whose accepted strings are exactly those matching `p.body` (and not `p.not`),
 * with blanks around: ipamd and the chart's schema test the same pattern.
 */
export function patterned<T>(p: Patterned<T>): Field<T> {
  const re = wholeRegExp(p.body);
  const not = p.not === undefined ? undefined : new RegExp(p.not);
  const str = chartString(p.body);
  const check = anyOfSchemas([
    ...(p.nonString ?? []),
    p.not === undefined ? str : { allOf: [str, { not: { pattern: p.not } }] },
  ]);
  return chartTyped(
    check,
    z.string().transform((s, ctx) => {
      if (re.test(s) && !not?.test(s)) return p.read(trimBlank(s));
      const why = p.detail?.(s);
      return fail(ctx, s, `${why ? `${why}; ` : ''}expected ${p.accepts}`);
    }),
    p.accepts,
  );
}

/** A whole number in [min, max] (decimal digits only: no sign, no fraction, no exponent). */
export function wholeNumber(min: number, max?: number): Field<number> {
  return patterned({
    body: uintPattern(min, max),
    accepts: max === undefined ? `a whole number >= ${min}` : `a whole number from ${min} to ${max}`,
    read: Number,
    nonString: [chartInteger(min, max)],
  });
}

/**
 * A decimal number in (0, max] (digits with an optional fraction: `5`, `0.5`; no sign or
 * exponent; `max` a whole number). Used for rates such as ENI_IPAM_EC2_RATE (calls/s).
 */
export function positiveDecimal(max: number): Field<number> {
  return patterned({
    body: decimalUpTo(max, true),
    accepts: `a number > 0 and <= ${max} (e.g. 5 or 0.5)`,
    read: Number,
    nonString: chartNumber(max, false),
  });
}

/** strconv.ParseBool's spellings (what aws-node accepts). */
export const PARSE_BOOL = ['1', 't', 'T', 'TRUE', 'true', 'True', '0', 'f', 'F', 'FALSE', 'false', 'False'] as const;

/**
 * A boolean: what aws-node's Go `strconv.ParseBool` accepts (1, t, T, TRUE, true, True, 0,
 * f, F, FALSE, false, False), so a copied value means the same; true and false also in any
 * other case (`tRuE`).
 */
export function bool(): Field<boolean> {
  return patterned({
    body: `${anyCase('true')}|${anyCase('false')}|[01tTfF]`,
    accepts: `a boolean: ${PARSE_BOOL.join(', ')} (the spellings of strconv.ParseBool; true and false in any case)`,
    read: (s) => ['true', 't', '1'].includes(s.toLowerCase()),
    nonString: [{ type: 'boolean' }, { type: 'integer', enum: [0, 1] }],
  });
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
type Unit = keyof typeof UNIT_MS;

/**
 * Longest duration accepted (ms): 596h. Node timers overflow above 2^31 − 1 ms (~596.5h)
 * and fire at once; 596h is a whole number in every unit, so the chart's pattern can say it.
 */
export const MAX_DURATION_MS = 596 * 3_600_000;

/** `ms` in the largest unit that divides it (`596h`, `300s`). */
function shownDuration(ms: number): string {
  const u = (['h', 'm', 's', 'ms'] as const).find((x) => ms % UNIT_MS[x] === 0)!;
  return `${ms / UNIT_MS[u]}${u}`;
}

/**
 * A duration, returned in ms (rounded; a value > 0 is at least 1 ms): a plain number is
 * seconds and may be fractional (`30`, `0.5`); or a number with a unit `ms`, `s`, `m`, `h`
 * (`500ms`, `2m`), each unit offered only where `maxMs` is a whole number of it.
 * @param minMs 0 (0 allowed) or 1 (only durations > 0).
 * @param maxMs longest accepted (ms), at most {@link MAX_DURATION_MS}.
 */
export function duration(minMs: 0 | 1 = 0, maxMs = MAX_DURATION_MS): Field<number> {
  const positive = minMs > 0;
  const units = (Object.keys(UNIT_MS) as Unit[]).filter((u) => maxMs % UNIT_MS[u] === 0);
  const body = units
    .map((u) => `(?:${decimalUpTo(maxMs / UNIT_MS[u], positive)})${u === 's' ? '(?:s)?' : u}`)
    .join('|');
  return patterned({
    body,
    accepts: `a duration${positive ? ' > 0' : ''} up to ${shownDuration(maxMs)}: seconds (e.g. 30 or 0.5) or a number with unit ${units.join(', ')} (e.g. 500ms, 2m)`,
    read: (s) => {
      const m = /^([0-9.]+)(ms|s|m|h)?$/.exec(s)!;
      const ms = Math.round(Number(m[1]) * UNIT_MS[(m[2] as Unit | undefined) ?? 's']);
      return positive ? Math.max(ms, 1) : ms;
    },
    nonString: chartNumber(maxMs / 1000, !positive),
  });
}

/** One of `values`, case-insensitive; returned in the case given in `values`. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T): Field<T[number]> {
  return patterned({
    body: values.map(anyCase).join('|'),
    accepts: `one of ${values.join(', ')} (any case)`,
    read: (s) => values.find((v) => v.toLowerCase() === s.toLowerCase())!,
  }) as Field<T[number]>;
}

/** A comma-separated list of IPv4 CIDRs (`10.0.0.0/8,192.168.0.0/16`); empty items are skipped. */
export function ipv4CidrList(): Field<string[]> {
  const cidr = wholeRegExp(IPV4_CIDR);
  return patterned({
    body: commaList(IPV4_CIDR),
    accepts: 'comma-separated IPv4 CIDRs such as 10.0.0.0/8,192.168.0.0/16 (a.b.c.d/0-32)',
    read: splitList,
    detail: (s) => {
      const bad = splitList(s).find((c) => !cidr.test(c));
      return bad === undefined ? undefined : `${JSON.stringify(bad)} is not an IPv4 CIDR`;
    },
  });
}

/** An http:// or https:// URL (host a name, an IPv4 address or [IPv6], optional port), returned as given. */
export function httpUrl(): Field<string> {
  return patterned({
    body: `[Hh][Tt][Tt][Pp][Ss]?://(?:\\[(?:${IPV6})\\]|${IPV4}|${HOST_NAME})(?::(?:${PORT}))?(?:[/?#][^ \\t\\n\\f\\r]*)?`,
    accepts: 'an http:// or https:// URL such as http://169.254.169.254 (host: a name, an IPv4 address or [IPv6])',
    read: (s) => s,
  });
}

/** `host:port` with an optional host (`:61678`, `127.0.0.1:61679`, `[::1]:80`), port 0–65535. */
export function hostPort(): Field<string> {
  return patterned({
    body: `(?:\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]*):(?:${PORT})`,
    accepts: 'host:port such as :61678 or 127.0.0.1:61679 (port 0-65535)',
    read: (s) => s,
  });
}

/** The host-side veth name prefix: 1–4 of [a-z0-9], not `eth`, `lo` or `vlan`. */
export function vethPrefix(): Field<string> {
  return patterned({
    body: '[a-z0-9]{1,4}',
    not: '^[ \\t\\n\\f\\r]*(?:eth|lo|vlan)[ \\t\\n\\f\\r]*$',
    accepts: '1 to 4 characters of [a-z0-9], not eth, lo or vlan',
    read: (s) => s,
  });
}

/** Any text up to `max` characters (Unicode code points, as JSON Schema's maxLength counts). */
export function text(max = 256): Field<string> {
  const accepts = `text of at most ${max} characters`;
  return chartTyped(
    chartString(undefined, { maxLength: max }),
    z.string().refine((s) => [...s].length <= max, { error: `expected ${accepts}` }),
    accepts,
  );
}

/** A log file size before rotation: a whole number with unit K, M or G (e.g. `100M`); returned upper-cased. */
export function fileSize(): Field<string> {
  return patterned({
    body: '[1-9][0-9]{0,6}[KMGkmg]',
    accepts: 'a whole number > 0 with unit K, M or G (e.g. 100M)',
    read: (s) => s.toUpperCase(),
  });
}

/** A comma-separated list of environment variable names (`A_B,C`); blanks and empty items skipped. */
export function envNameList(): Field<string[]> {
  return patterned({
    body: commaList('[A-Za-z_][A-Za-z0-9_]*'),
    accepts: 'comma-separated environment variable names such as WARM_ENI_TARGET,AWS_VPC_ENI_MTU',
    read: splitList,
  });
}
