/**
 * Garbage-answer knobs of the simulated cloud: IMDS paths that answer a body the test
 * chooses (e.g. HTML from a misbehaving proxy) and EC2 actions whose XML answers carry
 * addresses that are not addresses, each for a number of answers or until cleared. For
 * testing that ipamd never lets an answer it cannot parse replace its last good view
 * (docs/design.md#bounds-on-bad-input). Set in process (`SimCloud.faults.garbage`) or over
 * HTTP (`POST <ec2Endpoint>/_sim/faults` with `{"garbage": {...}}`).
 */
import { z } from 'zod';

/** The `garbage` key of the fault config. */
export const GarbageConfigSchema = z
  .object({
    /** IMDS path suffix (e.g. `local-ipv4s`) → body to answer with, or null to clear. */
    imds: z.record(z.string().min(1), z.union([z.string(), z.null()])).optional(),
    /** EC2 action → how many answers to garble (each `<privateIpAddress>` becomes "not-an-ip"), or null to clear. */
    ec2: z.record(z.string().min(1), z.union([z.number().int().positive(), z.null()])).optional(),
  })
  .strict();

/** What the EC2 garbling writes where an address was. */
export const GARBLED_ADDRESS = 'not-an-ip';

/** The knobs. */
export class GarbageKnobs {
  private readonly imds = new Map<string, string>();
  private readonly ec2 = new Map<string, number>();

  /** IMDS answers `body` (200) for every path ending in `suffix` until cleared (`null`). */
  setImds(suffix: string, body: string | null): void {
    if (body === null) this.imds.delete(suffix);
    else this.imds.set(suffix, body);
  }

  /** The garbage body for IMDS `path`, if a knob covers it. */
  imdsFor(path: string): string | undefined {
    for (const [suffix, body] of this.imds) if (path.endsWith(suffix)) return body;
    return undefined;
  }

  /** The next `count` answers to `action` carry garbage addresses (`null` clears). */
  setEc2(action: string, count: number | null): void {
    if (count === null) this.ec2.delete(action);
    else this.ec2.set(action, count);
  }

  /** `xml` with its addresses garbled when a knob covers `action` (and one answer of its count used). */
  garble(action: string, xml: string): string {
    const left = this.ec2.get(action);
    if (left === undefined) return xml;
    if (left <= 1) this.ec2.delete(action);
    else this.ec2.set(action, left - 1);
    return xml.replace(
      /<privateIpAddress>[^<]*<\/privateIpAddress>/g,
      `<privateIpAddress>${GARBLED_ADDRESS}</privateIpAddress>`,
    );
  }

  /** Applies the `garbage` key of a fault config. */
  configure(c: z.infer<typeof GarbageConfigSchema>): void {
    for (const [k, v] of Object.entries(c.imds ?? {})) this.setImds(k, v);
    for (const [k, v] of Object.entries(c.ec2 ?? {})) this.setEc2(k, v);
  }

  /** Clears every knob. */
  reset(): void {
    this.imds.clear();
    this.ec2.clear();
  }

  /** JSON view. */
  snapshot(): Record<string, unknown> {
    return { imds: Object.fromEntries(this.imds), ec2: Object.fromEntries(this.ec2) };
  }
}
