/** The row shape of the config tests' per-variable table (see config-rows-*.ts). */
import type { IpamdConfig } from '../../ipamd/config.js';

/**
 * One variable's table row in the config tests: its config `key`, the default `def` it
 * parses to, `good` values with what they parse to, and `bad` values that must be refused.
 */
export interface Row {
  name: string;
  key: keyof IpamdConfig;
  def: unknown;
  good: Array<[string, unknown]>;
  bad: string[];
}
