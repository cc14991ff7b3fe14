/**
 * Parses the sim CLI's world flags: `--vpc-cidr PRIMARY[,SECONDARY...]` and
 * `--subnet CIDR[:ZONE[:KEY=VALUE[,KEY=VALUE...]]]` (e.g.
 * `100.64.0.0/19:us-west-2b:kubernetes.io/role/cni=1`). Only the first two `:` split the
 * subnet spec, so tag keys and values may hold `:`; tags are separated by `,`, a tag
 * without `=` has the empty value. Pure: errors are `Error`s naming the flag and the form.
 */
import { parseIpv4Cidr } from './address-pool.js';

/** One extra subnet of the simulated world. */
export interface SubnetSpec {
  cidr: string;
  /** Zone name; undefined = the region's first zone. */
  availabilityZone?: string;
  tags: Record<string, string>;
}

/**
 * Parses `--vpc-cidr`: one or more comma-separated IPv4 CIDRs, primary first.
 * @throws Error naming the bad entry.
 */
export function parseVpcCidrs(v: string): { primary: string; secondary: string[] } {
  const parts = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (parts.length === 0) throw new Error(`--vpc-cidr must list one or more IPv4 CIDRs, got '${v}'`);
  const norm = parts.map((c) => {
    try {
      return parseIpv4Cidr(c).cidr;
    } catch {
      throw new Error(`--vpc-cidr entry '${c}' is not an IPv4 CIDR such as 10.0.0.0/16`);
    }
  });
  return { primary: norm[0]!, secondary: norm.slice(1) };
}

/**
 * Parses one `--subnet` value (see the module docstring).
 * @throws Error naming the value and the accepted form.
 */
export function parseSubnetSpec(v: string): SubnetSpec {
  const form = 'CIDR[:ZONE[:KEY=VALUE,...]]';
  const i = v.indexOf(':');
  const cidrText = i < 0 ? v : v.slice(0, i);
  let cidr: string;
  try {
    cidr = parseIpv4Cidr(cidrText).cidr;
  } catch {
    throw new Error(`--subnet '${v}': '${cidrText}' is not an IPv4 CIDR (form ${form})`);
  }
  if (i < 0) return { cidr, tags: {} };
  const rest = v.slice(i + 1);
  const j = rest.indexOf(':');
  const zone = j < 0 ? rest : rest.slice(0, j);
  if (zone !== '' && !/^[a-z]{2}(-[a-z]+)+-\d+[a-z]$/.test(zone))
    throw new Error(`--subnet '${v}': '${zone}' is not an availability zone name such as us-west-2a (form ${form})`);
  const tags: Record<string, string> = {};
  if (j >= 0) {
    for (const t of rest.slice(j + 1).split(',')) {
      if (t === '') continue;
      const k = t.indexOf('=');
      const key = k < 0 ? t : t.slice(0, k);
      if (key === '') throw new Error(`--subnet '${v}': tag '${t}' has an empty key (form ${form})`);
      tags[key] = k < 0 ? '' : t.slice(k + 1);
    }
  }
  return { cidr, ...(zone ? { availabilityZone: zone } : {}), tags };
}
