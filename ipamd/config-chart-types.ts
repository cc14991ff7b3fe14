/**
 * What the Helm chart's values.schema.json accepts for each `env.*` key: every schema
 * builder of config-fields.ts and config-path-fields.ts tags the field it returns with a
 * JSON Schema (draft 7 subset) of the chart values that can render into a value the field
 * may accept. The chart quotes every env value, so a number or boolean written unquoted
 * is accepted where its text would be. Patterns are RE2-compatible (helm validates with
 * Go), allow surrounding blanks (ipamd trims) and the empty string (ipamd: unset).
 * ipamd's own parse stays the judge: ranges a pattern cannot say are checked at start.
 * No I/O.
 */

/** A JSON Schema fragment (the keywords helm's validator understands). */
export type JsonSchema = Record<string, unknown>;

const TYPES = new WeakMap<object, JsonSchema>();

/** Tags `field` with the chart schema of its values and returns it. */
export function chartTyped<F extends object>(schema: JsonSchema, field: F): F {
  TYPES.set(field, schema);
  return field;
}

/** The chart schema `field` was tagged with by {@link chartTyped}, or undefined. */
export function chartTypeOf(field: object): JsonSchema | undefined {
  return TYPES.get(field);
}

/** A string matching `pattern` (an RE2 group without anchors), blanks around it or empty allowed. */
export function chartString(pattern?: string, extra: JsonSchema = {}): JsonSchema {
  return pattern === undefined
    ? { type: 'string', ...extra }
    : { type: 'string', pattern: `^\\s*(?:${pattern})?\\s*$`, ...extra };
}

/** `word` in any case as an RE2 pattern (`[Tt][Rr][Uu][Ee]`; digits and symbols kept, regex metacharacters escaped). */
export function anyCase(word: string): string {
  return [...word]
    .map((ch) =>
      ch.toLowerCase() !== ch.toUpperCase()
        ? `[${ch.toUpperCase()}${ch.toLowerCase()}]`
        : ch.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'),
    )
    .join('');
}

/** true/false/1/0 in any case, as a YAML boolean, the integers 0 and 1, or text. */
export const CHART_BOOL: JsonSchema = {
  anyOf: [
    { type: 'boolean' },
    { type: 'integer', enum: [0, 1] },
    chartString(`${anyCase('true')}|${anyCase('false')}|[01tTfF]`),
  ],
};

/** A whole number from `min` (to `max`), unquoted or as text. */
export function chartWhole(min: number, max?: number): JsonSchema {
  return {
    anyOf: [{ type: 'integer', minimum: min, ...(max !== undefined ? { maximum: max } : {}) }, chartString('[0-9]+')],
  };
}

/** A duration: seconds unquoted, or text with an optional unit ms, s, m, h. */
export const CHART_DURATION: JsonSchema = {
  anyOf: [{ type: 'number', minimum: 0 }, chartString('(?:[0-9]+(?:\\.[0-9]+)?|\\.[0-9]+)(?:ms|s|m|h)?')],
};
