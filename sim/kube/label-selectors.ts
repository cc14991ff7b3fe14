/**
 * Label selectors for the stand-in (`labelSelector=` on list and watch), as in
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors:
 * comma-separated requirements combined with AND; equality-based `k=v`, `k==v`, `k!=v`
 * (`!=` also matches objects without the label), set-based `k in (a,b)`, `k notin (a,b)`,
 * existence `k` and `!k`.
 */
import type { KubeObject } from './objects.js';

/** One parsed requirement. */
export interface LabelRequirement {
  key: string;
  op: 'in' | 'notin' | 'exists' | '!exists';
  values: string[];
}

/** Error for a selector the real API would also reject (HTTP 400). */
export class LabelSelectorError extends Error {}

/** Splits on commas outside parentheses. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(cur);
      cur = '';
    } else cur += ch;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter((s) => s.length > 0);
}

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;

function key(k: string, term: string): string {
  const t = k.trim();
  if (!KEY.test(t)) throw new LabelSelectorError(`invalid label key "${t}" in label selector term "${term}"`);
  return t;
}

/**
 * Parses `selector` (may be null or empty: matches everything).
 * @throws LabelSelectorError for a malformed term.
 */
export function parseLabelSelector(selector: string | null): LabelRequirement[] {
  if (!selector) return [];
  return terms(selector).map((term): LabelRequirement => {
    let m = /^(.+?)\s+(in|notin)\s*\((.*)\)$/.exec(term);
    if (m) {
      const values = m[3]!
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v.length > 0);
      return { key: key(m[1]!, term), op: m[2] === 'in' ? 'in' : 'notin', values };
    }
    m = /^([^!=]+)(!=|==|=)(.*)$/.exec(term);
    if (m) return { key: key(m[1]!, term), op: m[2] === '!=' ? 'notin' : 'in', values: [m[3]!.trim()] };
    if (term.startsWith('!')) return { key: key(term.slice(1), term), op: '!exists', values: [] };
    return { key: key(term, term), op: 'exists', values: [] };
  });
}

/** True when `obj`'s `metadata.labels` satisfy every requirement. */
export function matchesLabels(reqs: LabelRequirement[], obj: KubeObject): boolean {
  const labels = obj.metadata.labels ?? {};
  return reqs.every((r) => {
    const has = Object.prototype.hasOwnProperty.call(labels, r.key);
    switch (r.op) {
      case 'exists':
        return has;
      case '!exists':
        return !has;
      case 'in':
        return has && r.values.includes(labels[r.key]!);
      case 'notin':
        return !has || !r.values.includes(labels[r.key]!);
    }
  });
}
