/**
 * zod builders for ipamd's environment variables: each turns the raw string into a
 * typed value, and on failure its issue message completes the sentence
 * `<VAR>="<value>" is invalid: <message>` (see `config.ts`). No I/O.
 */
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { anyCase, CHART_BOOL, CHART_DURATION, chartString, chartTyped, chartWhole } from './config-chart-types.js';

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

/** A whole number in [min, max] (decimal digits only: no sign, no fraction, no exponent). */
export function wholeNumber(min: number, max?: number): Field<number> {
  const msg = max === undefined ? `expected a whole number >= ${min}` : `expected a whole number from ${min} to ${max}`;
  const n = z.number({ error: msg }).int({ error: msg }).min(min, { error: msg });
  return chartTyped(
    chartWhole(min, max),
    z
      .string()
      .trim()
      .regex(/^[0-9]+$/, { error: msg })
      .transform(Number)
      .pipe(max === undefined ? n : n.max(max, { error: msg })),
  );
}

/**
 * A decimal number in (0, max] (digits with an optional fraction: `5`, `0.5`; no sign or
 * exponent). Used for rates such as ENI_IPAM_EC2_RATE (calls/s).
 */
export function positiveDecimal(max: number): Field<number> {
  const msg = `expected a number > 0 and <= ${max} (e.g. 5 or 0.5)`;
  return chartTyped(
    {
      anyOf: [{ type: 'number', exclusiveMinimum: 0, maximum: max }, chartString('[0-9]+(?:\\.[0-9]+)?|\\.[0-9]+')],
    },
    z
      .string()
      .trim()
      .regex(/^(\d+(\.\d+)?|\.\d+)$/, { error: msg })
      .transform(Number)
      .pipe(z.number({ error: msg }).positive({ error: msg }).max(max, { error: msg })),
  );
}

/**
 * true/false/t/f/1/0, case-insensitive: what aws-node's Go `strconv.ParseBool` accepts
 * (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False), so a copied value means the same.
 */
export function bool(): Field<boolean> {
  const msg = 'expected true, false, t, f, 1 or 0';
  return chartTyped(
    CHART_BOOL,
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['true', 'false', 't', 'f', '1', '0'], { error: msg }))
      .transform((v) => v === 'true' || v === 't' || v === '1'),
  );
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Longest duration accepted (ms): Node timers overflow above 2^31 − 1 ms (~24.8 days) and fire at once. */
export const MAX_DURATION_MS = 2_147_483_647;

/**
 * A duration, returned in ms (rounded): a plain number is seconds and may be fractional
 * (`30`, `0.5`); or a number with a unit `ms`, `s`, `m`, `h` (`500ms`, `2m`). At most
 * {@link MAX_DURATION_MS} (596h), since ipamd arms timers with these values.
 * @param minMs smallest accepted value (ms).
 */
export function duration(minMs = 0): Field<number> {
  const msg = `expected a duration${minMs > 0 ? ' > 0' : ''} up to 596h: seconds (e.g. 30 or 0.5) or a number with unit ms, s, m or h (e.g. 500ms, 2m)`;
  return chartTyped(
    CHART_DURATION,
    z
      .string()
      .trim()
      .transform((s, ctx) => {
        const m = /^(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)?$/.exec(s);
        if (!m) return fail(ctx, s, msg);
        const ms = Math.round(Number(m[1]) * UNIT_MS[m[2] ?? 's']!);
        if (!Number.isSafeInteger(ms) || ms < minMs || ms > MAX_DURATION_MS) return fail(ctx, s, msg);
        return ms;
      }),
  );
}

/** One of `values`, case-insensitive; returned in the case given in `values`. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T): Field<T[number]> {
  const msg = `expected one of ${values.join(', ')}`;
  return chartTyped(
    chartString(values.map(anyCase).join('|'), { description: `one of ${values.join(', ')} (any case)` }),
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(values, { error: msg })) as unknown as Field<T[number]>,
  );
}

/** A comma-separated list of IPv4 CIDRs (`10.0.0.0/8,192.168.0.0/16`); empty items are skipped. */
export function ipv4CidrList(): Field<string[]> {
  return chartTyped(
    chartString(),
    z.string().transform((s, ctx) => {
      const items = s
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
      for (const c of items) {
        if (!ipaddr.IPv4.isValidCIDRFourPartDecimal(c))
          return fail(
            ctx,
            s,
            `"${c}" is not an IPv4 CIDR; expected comma-separated IPv4 CIDRs such as 10.0.0.0/8,192.168.0.0/16`,
          );
      }
      return items;
    }),
  );
}

const RESERVED_TAG = /^(aws:|node\.k8s\.amazonaws\.com\/)|^cluster\.k8s\.amazonaws\.com\/name$/i;
/** Tags ipamd itself puts on its ENIs (instance_id, createdAt, cluster name): the rest of AWS's 50 per resource. */
const MAX_EXTRA_TAGS = 47;

/**
 * A JSON object of string → string EC2 tags, following AWS's tag rules (key 1–128
 * characters, value ≤ 256, no `aws:` prefix, ≤ 50 tags per resource) and refusing the
 * tags ipamd sets itself (`node.k8s.amazonaws.com/*`, `cluster.k8s.amazonaws.com/name`).
 */
export function tagMap(): Field<Record<string, string>> {
  const expected = 'expected a JSON object of string tag values such as {"team":"net"}';
  return chartTyped(
    chartString(undefined, { description: 'a JSON object of string tag values' }),
    z.string().transform((s, ctx) => {
      let v: unknown;
      try {
        v = JSON.parse(s);
      } catch {
        return fail(ctx, s, `not JSON; ${expected}`);
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(ctx, s, expected);
      const entries = Object.entries(v as Record<string, unknown>);
      if (entries.length > MAX_EXTRA_TAGS)
        return fail(
          ctx,
          s,
          `${entries.length} tags; at most ${MAX_EXTRA_TAGS} (EC2 allows 50 per ENI and ipamd sets 3)`,
        );
      for (const [k, val] of entries) {
        if (typeof val !== 'string') return fail(ctx, s, `tag "${k}" has a non-string value; ${expected}`);
        if (k.length < 1 || k.length > 128) return fail(ctx, s, `tag key "${k}" must be 1 to 128 characters`);
        if (val.length > 256) return fail(ctx, s, `tag "${k}" value must be at most 256 characters`);
        if (RESERVED_TAG.test(k))
          return fail(
            ctx,
            s,
            `tag key "${k}" is reserved (aws:*, node.k8s.amazonaws.com/*, cluster.k8s.amazonaws.com/name)`,
          );
      }
      return Object.fromEntries(entries) as Record<string, string>;
    }),
  );
}

/** An http:// or https:// URL, returned as given. */
export function httpUrl(): Field<string> {
  const msg = 'expected an http:// or https:// URL such as http://169.254.169.254';
  return chartTyped(
    chartString('[Hh][Tt][Tt][Pp][Ss]?://\\S+'),
    z
      .string()
      .trim()
      .pipe(z.url({ protocol: /^https?$/, error: msg })),
  );
}

/** `host:port` with an optional host (`:61678`, `127.0.0.1:61679`, `[::1]:80`), port 0–65535. */
export function hostPort(): Field<string> {
  const msg = 'expected host:port such as :61678 or 127.0.0.1:61679 (port 0-65535)';
  return chartTyped(
    chartString('(?:\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]*):[0-9]{1,5}'),
    z
      .string()
      .trim()
      .transform((s, ctx) => {
        const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):([0-9]{1,5})$/.exec(s);
        if (!m || Number(m[2]) > 65535) return fail(ctx, s, msg);
        return s;
      }),
  );
}

/** The host-side veth name prefix: 1–4 of [a-z0-9], not `eth`, `lo` or `vlan`. */
export function vethPrefix(): Field<string> {
  const msg = 'expected 1 to 4 characters of [a-z0-9], not eth, lo or vlan';
  return chartTyped(
    chartString('[a-z0-9]{1,4}'),
    z
      .string()
      .trim()
      .regex(/^[a-z0-9]{1,4}$/, { error: msg })
      .refine((s) => !['eth', 'lo', 'vlan'].includes(s), { error: msg }),
  );
}

/** Any text up to `max` characters. */
export function text(max = 256): Field<string> {
  return chartTyped(
    chartString(undefined, { maxLength: max }),
    z.string().max(max, { error: `expected at most ${max} characters` }),
  );
}

/** A log file size before rotation: a whole number with unit K, M or G (e.g. `100M`); returned as given. */
export function fileSize(): Field<string> {
  const msg = 'expected a whole number > 0 with unit K, M or G (e.g. 100M)';
  return chartTyped(
    chartString('[1-9][0-9]{0,6}[KMGkmg]'),
    z
      .string()
      .trim()
      .toUpperCase()
      .regex(/^[1-9][0-9]{0,6}[KMG]$/, { error: msg }),
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
  const msg =
    'expected a Kubernetes label/annotation key, [prefix/]name: the name 1-63 characters of [A-Za-z0-9-_.] starting and ending alphanumeric, the optional prefix a DNS subdomain (e.g. k8s.amazonaws.com/eniConfig, topology.kubernetes.io/zone)';
  const name = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
  const dns = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
  return chartTyped(
    chartString('(?:[a-z0-9.-]{1,253}/)?[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?'),
    z
      .string()
      .trim()
      .refine(
        (s) => {
          const i = s.lastIndexOf('/');
          if (i < 0) return name.test(s);
          const prefix = s.slice(0, i);
          return prefix.length <= 253 && dns.test(prefix) && name.test(s.slice(i + 1));
        },
        { error: msg },
      ),
  );
}

/** A comma-separated list of environment variable names (`A_B,C`); blanks and empty items skipped. */
export function envNameList(): Field<string[]> {
  const msg = 'expected comma-separated environment variable names such as WARM_ENI_TARGET,AWS_VPC_ENI_MTU';
  return chartTyped(
    chartString('[A-Za-z_][A-Za-z0-9_]*(?:\\s*,\\s*[A-Za-z_][A-Za-z0-9_]*)*'),
    z.string().transform((s, ctx) => {
      const names = s
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== '');
      return names.every((n) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(n)) ? names : fail(ctx, s, msg);
    }),
  );
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
  const msg = 'expected a mark from 1 to 0xffffffff, decimal (128) or 0x/0o/0b (0x80)';
  return chartTyped(
    {
      anyOf: [
        { type: 'integer', minimum: 1, maximum: 0xffffffff },
        chartString('0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|[1-9][0-9]*'),
      ],
    },
    z
      .string()
      .trim()
      .transform((s, ctx) => {
        const m = /^(?:0x[0-9a-f]+|0o[0-7]+|0b[01]+|[1-9][0-9]*)$/i.exec(s);
        const n = m ? Number(s.toLowerCase()) : NaN;
        return Number.isSafeInteger(n) && n >= 1 && n <= 0xffffffff ? n : fail(ctx, s, msg);
      }),
  );
}
