/**
 * Resource id and MAC generation in EC2's formats (`eni-` + 17 hex digits, etc.).
 * With a seed the sequence is deterministic (mulberry32 PRNG); without, it uses crypto.
 */
import { randomBytes } from 'node:crypto';

/** Generates EC2-style ids. */
export class IdGenerator {
  private state: number;
  private readonly seeded: boolean;

  /** @param seed any integer; when undefined ids come from `crypto.randomBytes`. */
  constructor(seed?: number) {
    this.seeded = seed !== undefined;
    this.state = (seed ?? 0) >>> 0;
  }

  /** `n` random bytes (deterministic when seeded). */
  bytes(n: number): Buffer {
    if (!this.seeded) return randomBytes(n);
    const out = Buffer.alloc(n);
    for (let i = 0; i < n; i++) out[i] = this.next() & 0xff;
    return out;
  }

  /** An id such as `eni-0a1b2c3d4e5f67890` (prefix + '-' + 17 lower-case hex digits). */
  id(prefix: string): string {
    return `${prefix}-0${this.bytes(8).toString('hex')}`;
  }

  /** A locally administered unicast MAC as EC2 assigns them, e.g. `0a:12:34:56:78:9a`. */
  mac(): string {
    const b = this.bytes(5);
    return ['0a', ...Array.from(b, (x) => x.toString(16).padStart(2, '0'))].join(':');
  }

  /** A request id in UUID format. */
  requestId(): string {
    const h = this.bytes(16).toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  /** Random hex token of `n` bytes. */
  hex(n: number): string {
    return this.bytes(n).toString('hex');
  }

  private next(): number {
    // mulberry32
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
}
