/**
 * The patterns of ipamd's settings, written once for both judges: ipamd tests a value with
 * the pattern compiled as a JavaScript RegExp, and the Helm chart's values.schema.json
 * carries the same text, which helm 4 compiles with Go's RE2. Only the syntax both engines
 * read the same way is used: character classes with explicit members (no `\s`, `\d`, `\w`:
 * they differ on Unicode), groups, alternation and counted repeats. Blanks around a value
 * are what RE2's `\s` matches (space, tab, LF, FF, CR), and {@link trimBlank} strips
 * exactly those. Numeric ranges come from to-regex-range. Pure: no I/O.
 */
import toRegexRange from 'to-regex-range';

/** One blank as both engines mean it (RE2's `\s`). */
export const BLANK = '[ \\t\\n\\f\\r]';

/** `s` without the {@link BLANK} characters around it (String.trim strips more: NBSP, U+2028, …). */
export function trimBlank(s: string): string {
  return s.replace(/^[ \t\n\f\r]+|[ \t\n\f\r]+$/g, '');
}

/** True when `s` is empty or blanks only (ipamd reads it as unset). */
export const isBlank = (s: string): boolean => /^[ \t\n\f\r]*$/.test(s);

/** The pattern of a whole value: `body` with blanks around it (anchored). */
export const whole = (body: string): string => `^${BLANK}*(?:${body})${BLANK}*$`;

/** A JavaScript RegExp of {@link whole}`(body)`. */
export const wholeRegExp = (body: string): RegExp => new RegExp(whole(body));

/** `word` in any case (`[Tt][Rr][Uu][Ee]`; digits and symbols kept, regex metacharacters escaped). */
export function anyCase(word: string): string {
  return [...word]
    .map((ch) =>
      ch.toLowerCase() !== ch.toUpperCase()
        ? `[${ch.toUpperCase()}${ch.toLowerCase()}]`
        : ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'),
    )
    .join('');
}

/**
 * Decimal digits whose value is in [min, max] (max undefined: no upper bound), leading
 * zeros allowed (`007` is 7, as `Number` reads it).
 */
export function uintPattern(min: number, max?: number): string {
  if (max !== undefined) return `0*(?:${toRegexRange(min, max)})`;
  const digits = String(min).length;
  return `0*(?:${toRegexRange(min, 10 ** digits - 1)}|[1-9][0-9]{${digits},})`;
}

/**
 * A decimal number (`5`, `0.5`, `.5`; no sign or exponent) with value at most `bound` (a
 * whole number >= 1), and above 0 when `positive`.
 */
export function decimalUpTo(bound: number, positive: boolean): string {
  const frac = '(?:\\.[0-9]+)?';
  const top = `0*${bound}(?:\\.0+)?`;
  if (positive) {
    const below = bound > 1 ? [`0*(?:${toRegexRange(1, bound - 1)})${frac}`] : [];
    return [...below, '0*\\.[0-9]*[1-9][0-9]*', top].join('|');
  }
  return [`0*(?:${toRegexRange(0, bound - 1)})${frac}`, '\\.[0-9]+', top].join('|');
}

/** An IPv4 address in four-part decimal, no leading zeros (`10.0.0.1`). */
export const IPV4 = (() => {
  const octet = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])';
  return `${octet}(?:\\.${octet}){3}`;
})();

/** An IPv4 CIDR: {@link IPV4}, `/`, a prefix length 0-32 without leading zeros. */
export const IPV4_CIDR = `${IPV4}/(?:3[0-2]|[12]?[0-9])`;

/** An IPv6 address in any of RFC 4291's compressed forms (no embedded IPv4), for URL hosts. */
export const IPV6 = (() => {
  const h = '[0-9a-fA-F]{1,4}';
  return [
    `(?:${h}:){7}${h}`,
    `(?:${h}:){1,7}:`,
    `(?:${h}:){1,6}:${h}`,
    `(?:${h}:){1,5}(?::${h}){1,2}`,
    `(?:${h}:){1,4}(?::${h}){1,3}`,
    `(?:${h}:){1,3}(?::${h}){1,4}`,
    `(?:${h}:){1,2}(?::${h}){1,5}`,
    `${h}:(?::${h}){1,6}`,
    `:(?:(?::${h}){1,7}|:)`,
  ].join('|');
})();

/** A TCP port 0-65535 in at most 5 digits (`080` is 80). */
export const PORT = `[0-9]{1,4}|0[0-9]{4}|${toRegexRange(10000, 65535)}`;

/**
 * A host name as ipamd accepts it in a URL: labels of letters, digits and `-`, the last one
 * starting with a letter (so it is never read as an IPv4 address, as WHATWG URL parsing
 * would), optionally ending with `.`.
 */
export const HOST_NAME = '(?:[A-Za-z0-9-]+\\.)*[A-Za-z][A-Za-z0-9-]*\\.?';

/** Comma-separated items matching `item`, blanks allowed around each, empty items allowed (skipped). */
export function commaList(item: string): string {
  const one = `${BLANK}*(?:${item})?${BLANK}*`;
  return `${one}(?:,${one})*`;
}

/** Splits a {@link commaList} value into its items, blanks stripped, empty ones dropped. */
export function splitList(s: string): string[] {
  return s
    .split(',')
    .map(trimBlank)
    .filter((x) => x !== '');
}
