/**
 * One row of ipamd's environment table: variable name, config key, schema field, default
 * and one sentence for operators (rendered into docs/configuration.md by scripts/config-reference.mjs).
 */
import type { Field } from './config-fields.js';
import type { IpamdConfig } from './config-types.js';

/** One environment variable ipamd reads (see {@link v}). */
export interface VarSpec {
  name: string;
  key: keyof IpamdConfig;
  field: Field<unknown>;
  /** Default as an env string (parsed by `field`), or undefined for "unset". */
  def?: string;
  /** Default as shown to operators, when it is not `def`. */
  shown?: string;
  description: string;
}

/**
 * Builds a {@link VarSpec}: `name` is the variable, `key` the config field it fills, `field`
 * its schema, `def` the default as an env string (undefined: unset), `shown` the default
 * as operators see it when it differs from `def`.
 */
export const v = <K extends keyof IpamdConfig>(
  name: string,
  key: K,
  field: Field<NonNullable<IpamdConfig[K]>>,
  def: string | undefined,
  description: string,
  shown?: string,
): VarSpec => ({
  name,
  key,
  field: field as Field<unknown>,
  ...(def !== undefined ? { def } : {}),
  ...(shown !== undefined ? { shown } : {}),
  description,
});
