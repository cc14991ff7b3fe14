/**
 * What the Helm chart's values.schema.json accepts for each `env.*` key, and the words both
 * gates use to say it: every schema builder of config-fields.ts and config-path-fields.ts
 * tags the field it returns with a {@link ChartTyping}: a JSON Schema (draft 7) `check` of
 * the chart values that render into a value the field accepts, and `accepts`, one phrase
 * saying what is accepted. ipamd's refusal says `expected <accepts>`; the chart's schema
 * refuses with the same phrase (config-reference.ts: helm 4 prints an `else` branch's
 * `const` as "value must be '<accepts>'"); docs/configuration.md lists it.
 *
 * Strings carry the very pattern ipamd tests (config-patterns.ts). The chart renders a
 * YAML number with `toJson` (digits, no exponent, for 1e-6 <= |x| < 1e21) and a boolean as
 * `true`/`false`, so the non-string branches accept exactly the numbers whose text the
 * field accepts. An empty or blank value is ipamd's "unset" and passes. No I/O.
 */
import { whole } from './config-patterns.js';

export { anyCase } from './config-patterns.js';

/** A JSON Schema fragment (the keywords helm's validator understands). */
export type JsonSchema = Record<string, unknown>;

/** The chart's check of a field's values and the phrase naming what it accepts. */
export interface ChartTyping {
  check: JsonSchema;
  /** What is accepted, completing "expected …" (e.g. `a whole number >= 0`). */
  accepts: string;
}

const TYPES = new WeakMap<object, ChartTyping>();

/** Tags `field` with its chart `check` and `accepts` phrase, and returns it. */
export function chartTyped<F extends object>(check: JsonSchema, field: F, accepts: string): F {
  TYPES.set(field, { check, accepts });
  return field;
}

/** The {@link ChartTyping} `field` was tagged with by {@link chartTyped}, or undefined. */
export function chartTypeOf(field: object): ChartTyping | undefined {
  return TYPES.get(field);
}

/** A string matching `body` (a pattern of config-patterns.ts) with blanks around it, or blank. */
export function chartString(body?: string, extra: JsonSchema = {}): JsonSchema {
  return body === undefined
    ? { type: 'string', ...extra }
    : { type: 'string', pattern: whole(`(?:${body})?`), ...extra };
}

/** Smallest non-zero YAML number the chart renders without an exponent (`toJson`). */
export const SMALLEST_PLAIN = 0.000001;
/** YAML numbers from here on render with an exponent (`1e+21`). */
export const PLAIN_BELOW = 1e21;

/** A YAML number in [0 or {@link SMALLEST_PLAIN}, max]: 0 only when `zero`. */
export function chartNumber(max: number, zero: boolean): JsonSchema[] {
  const positive = { type: 'number', minimum: SMALLEST_PLAIN, maximum: max };
  return zero ? [{ type: 'number', enum: [0] }, positive] : [positive];
}

/** A whole number from `min` (to `max`) as a YAML integer (below {@link PLAIN_BELOW}). */
export function chartInteger(min: number, max?: number): JsonSchema {
  return {
    type: 'integer',
    minimum: min,
    ...(max !== undefined ? { maximum: max } : { exclusiveMaximum: PLAIN_BELOW }),
  };
}

/** `alternatives` as one schema (anyOf when more than one). */
export const anyOfSchemas = (alternatives: JsonSchema[]): JsonSchema =>
  alternatives.length === 1 ? alternatives[0]! : { anyOf: alternatives };
