/**
 * More zod builders of config-fields.ts: ENI tags (JSON), Kubernetes label keys and the
 * NodePort connection mark. Each is tagged with its chart typing like the others. No I/O.
 */
import toRegexRange from 'to-regex-range';
import { z } from 'zod';
import { chartString, chartTyped } from './config-chart-types.js';
import { fail, patterned, type Field } from './config-fields.js';
import { BLANK } from './config-patterns.js';

const RESERVED_TAG = /^(aws:|node\.k8s\.amazonaws\.com\/)|^cluster\.k8s\.amazonaws\.com\/name$/i;
/** Tags ipamd itself puts on its ENIs (instance_id, createdAt, cluster name): the rest of AWS's 50 per resource. */
export const MAX_EXTRA_TAGS = 47;

/** What ADDITIONAL_ENI_TAGS accepts (the chart's template says the same: templates/_env-tags.tpl). */
export const TAGS_ACCEPTED = 'a JSON object of string tag values such as {"team":"net"}';

/**
 * A JSON object of string → string EC2 tags, following AWS's tag rules (key 1–128
 * characters, value ≤ 256, counted in Unicode code points, no `aws:` prefix, ≤ 50 tags per
 * resource) and refusing the tags ipamd sets itself (`node.k8s.amazonaws.com/*`,
 * `cluster.k8s.amazonaws.com/name`). The chart's schema types it as text; its template
 * (`eni-ipam.checkTags`) parses it and refuses what this refuses, with the same words.
 */
export function tagMap(): Field<Record<string, string>> {
  const expected = `expected ${TAGS_ACCEPTED}`;
  const chars = (s: string) => [...s].length;
  return chartTyped(
    chartString(),
    z.string().transform((s, ctx) => {
      let v: unknown;
      try {
        v = JSON.parse(s);
      } catch {
        return fail(ctx, s, `not JSON; ${expected}`);
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        return fail(ctx, s, `not a JSON object; ${expected}`);
      // In key order (the chart's template checks them sorted too, so both name the same tag).
      const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      if (entries.length > MAX_EXTRA_TAGS)
        return fail(
          ctx,
          s,
          `${entries.length} tags; at most ${MAX_EXTRA_TAGS} (EC2 allows 50 per ENI and ipamd sets 3)`,
        );
      for (const [k, val] of entries) {
        if (typeof val !== 'string') return fail(ctx, s, `tag "${k}" has a non-string value; ${expected}`);
        if (chars(k) < 1 || chars(k) > 128) return fail(ctx, s, `tag key "${k}" must be 1 to 128 characters`);
        if (chars(val) > 256) return fail(ctx, s, `tag "${k}" value must be at most 256 characters`);
        if (RESERVED_TAG.test(k))
          return fail(
            ctx,
            s,
            `tag key "${k}" is reserved (aws:*, node.k8s.amazonaws.com/*, cluster.k8s.amazonaws.com/name)`,
          );
      }
      return Object.fromEntries(entries) as Record<string, string>;
    }),
    TAGS_ACCEPTED,
  );
}

/**
 * A Kubernetes label or annotation key (`[prefix/]name`, as the API validates it:
 * https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
 * the optional prefix a DNS subdomain (lower-case alphanumerics, `-` and `.`, at most 253
 * characters), the name 1-63 characters of alphanumerics, `-`, `_` and `.`, starting and
 * ending alphanumeric. Used for ENI_CONFIG_LABEL_DEF and ENI_CONFIG_ANNOTATION_DEF.
 */
export function labelKey(): Field<string> {
  const label = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
  return patterned({
    body: `(?:${label}(?:\\.${label})*/)?[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?`,
    not: `^${BLANK}*[^/]{254,}/`,
    accepts:
      'a Kubernetes label/annotation key, [prefix/]name: the name 1-63 characters of [A-Za-z0-9-_.] starting and ending alphanumeric, the optional prefix a DNS subdomain of at most 253 characters (e.g. k8s.amazonaws.com/eniConfig, topology.kubernetes.io/zone)',
    read: (s) => s,
  });
}

// ---- NodePort support (issue 29: AWS_VPC_K8S_CNI_CONNMARK) ----

/**
 * A connection mark (AWS_VPC_K8S_CNI_CONNMARK) from 1 to 0xffffffff, written as
 * amazon-vpc-cni-k8s reads it (Go `strconv.ParseInt(s, 0, 64)`): decimal (`128`) or
 * `0x80`, `0o200`, `0b10000000`. A leading-zero decimal (`0200`, octal to Go) is refused
 * rather than read differently; where amazon-vpc-cni-k8s falls back to 0x80 on a bad or
 * out-of-range value, ipamd refuses it by name.
 */
export function connmarkValue(): Field<number> {
  return patterned({
    body: [
      '0[xX]0*[1-9a-fA-F][0-9a-fA-F]{0,7}',
      '0[oO]0*(?:[1-7][0-7]{0,9}|[1-3][0-7]{10})',
      '0[bB]0*1[01]{0,31}',
      toRegexRange(1, 0xffffffff),
    ].join('|'),
    accepts: 'a mark from 1 to 0xffffffff, decimal (128) or 0x/0o/0b (0x80)',
    read: (s) => Number(s.toLowerCase()),
    nonString: [{ type: 'integer', minimum: 1, maximum: 0xffffffff }],
  });
}

const DNS_LABEL = '[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?';

/** A Kubernetes namespace name: a DNS-1123 label (lower-case, at most 63). */
export function dnsLabel(): Field<string> {
  return patterned({
    body: DNS_LABEL,
    accepts: 'a namespace name (lower-case letters, digits and -, at most 63) such as kube-system',
    read: (s) => s,
  });
}

/**
 * A namespaced object's `<namespace>/<name>` (ENI_IPAM_DAEMONSET): a DNS-1123 label
 * (namespace, at most 63) and a DNS-1123 subdomain (name, at most 253), Kubernetes' rules
 * for both (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/).
 */
export function namespacedName(): Field<string> {
  const label = DNS_LABEL;
  const sub = `${label}(?:\\.${label})*`;
  return patterned({
    body: `${label}/${sub}`,
    accepts: 'a namespace and a name, lower-case DNS names, such as kube-system/eni-ipam',
    read: (s) => s,
    detail: (s) => (s.length > 317 ? 'too long' : undefined),
  });
}
