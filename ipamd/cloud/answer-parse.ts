/**
 * Checks of what IMDS and EC2 answer, field by field, before an answer may become ipamd's
 * view (docs/design.md#bounds-on-bad-input): an answer that fails to parse is refused whole
 * — the caller keeps its last good view — and reported once per answer to
 * {@link ParseErrorObserver} (ipamd logs it at warn naming the field and counts it in
 * `eni_ipam_imds_parse_errors_total` / `eni_ipam_ec2_parse_errors_total`). Pure: no I/O.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** An answer field that is not what the API documents. */
export class AnswerParseError extends Error {
  constructor(
    /** `imds` or `ec2`. */
    readonly source: 'imds' | 'ec2',
    /** The IMDS path or the EC2 action answered. */
    readonly where: string,
    /** The field (IMDS: the last path segment, e.g. `local-ipv4s`; EC2: the SDK field, e.g. `PrivateIpAddress`). */
    readonly field: string,
    /** The offending value, cut to 64 characters. */
    readonly value: string,
  ) {
    super(`${source} ${where}: field ${field} does not parse: ${JSON.stringify(value.slice(0, 64))}`);
    this.name = 'AnswerParseError';
  }
}

/** Told of every answer refused because a field did not parse. */
export type ParseErrorObserver = (e: AnswerParseError) => void;

const CIDR = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/;
const SHAPES = {
  ipv4: (v: string) => isIPv4(v),
  cidr: (v: string) => {
    const m = CIDR.exec(v);
    return !!m && isIPv4(m[1]!) && Number(m[2]) <= 32;
  },
  ipv6: (v: string) => isIPv6(v),
  /** An IPv6 CIDR such as `2600:1f14:abc:de01::/64` or a `/80` prefix. */
  cidr6: (v: string) => {
    const i = v.lastIndexOf('/');
    return i > 0 && isIPv6(v.slice(0, i)) && /^\d{1,3}$/.test(v.slice(i + 1)) && Number(v.slice(i + 1)) <= 128;
  },
  eniId: (v: string) => /^eni-[0-9a-f]{8,17}$/.test(v),
  subnetId: (v: string) => /^subnet-[0-9a-f]{8,17}$/.test(v),
  vpcId: (v: string) => /^vpc-[0-9a-f]{8,17}$/.test(v),
  sgId: (v: string) => /^sg-[0-9a-f]{8,17}$/.test(v),
  mac: (v: string) => /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(v),
  uint: (v: string) => /^\d{1,4}$/.test(v),
} as const;

/** The shapes a field can be checked against. */
export type FieldShape = keyof typeof SHAPES;

/**
 * Returns `values` when each matches `shape`.
 * @throws AnswerParseError naming `field` at the first that does not.
 */
export function checkAll(
  source: 'imds' | 'ec2',
  where: string,
  field: string,
  shape: FieldShape,
  values: readonly string[],
): string[] {
  for (const v of values) if (!SHAPES[shape](v)) throw new AnswerParseError(source, where, field, v);
  return [...values];
}

/** {@link checkAll} for one value. @throws AnswerParseError */
export function checkOne(
  source: 'imds' | 'ec2',
  where: string,
  field: string,
  shape: FieldShape,
  value: string,
): string {
  return checkAll(source, where, field, shape, [value])[0]!;
}
