/**
 * The start-up adoption of wired /128s (`ipv6`/`dual` mode, issue #31): before the first
 * IPv6 ADD is answered, the kernel's `/128` routes to pod veths (restore's kernel source,
 * kernel-parse.ts `addKernelV6Routes`) are read and every one inside the node's /80 that
 * no IPv6 allocation holds is quarantined, and in `ipv6` mode each wired egress IPv4 of
 * 169.254.172.0/22 the same way (datastore/ipv6-allocations.ts `adoptWired`),
 * so a lost or set-aside IPv6 checkpoint can never make ipamd hand a live pod's address
 * to a new pod. A /128 left unused costs nothing; a duplicate address breaks two pods.
 *
 * When the kernel cannot be read, nothing is guessed: IPv6 ADDs fail (IpamdFailure,
 * cause `not-ready`, retried by the kubelet) until a read succeeds.
 */
import { IpamdCause } from '../../proto/ipamd-cause.js';
import type { Ipv6Allocations } from '../datastore/ipv6-allocations.js';
import type { Logger } from '../log.js';
import type { KernelReader } from '../restore/kernel-source.js';
import { IpamdFailure } from './ipamd-failure.js';

/** Options of {@link WiredV6Adoption}. */
export interface WiredV6AdoptionOptions {
  v6: Ipv6Allocations;
  kernel: KernelReader;
  /** Makes the quarantine durable (the IPv6 checkpoint); a failed write is logged, the next write carries it. */
  persistV6: () => Promise<void>;
  log: Logger;
}

/** Reads the kernel once successfully and quarantines the unheld wired /128s (see the module docstring). */
export class WiredV6Adoption {
  private done = false;
  private inFlight: Promise<void> | undefined;
  private lastError = '';
  /** How many /128s were quarantined by the adoption (0 until it ran). */
  adopted = 0;

  constructor(private readonly o: WiredV6AdoptionOptions) {}

  /** True once the kernel was read and the adoption applied. */
  get ready(): boolean {
    return this.done;
  }

  /**
   * Runs the adoption unless it already succeeded; concurrent callers share one read.
   * @throws IpamdFailure (cause `not-ready`) naming why when the kernel is unreadable.
   */
  ensure(): Promise<void> {
    if (this.done) return Promise.resolve();
    this.inFlight ??= this.run().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async run(): Promise<void> {
    let wired: string[];
    try {
      const k = await this.o.kernel.readKernel();
      wired = [...k.pods.keys()];
    } catch (e) {
      const why = (e as Error).message;
      if (why !== this.lastError)
        this.o.log.error(
          { err: why },
          "IPv6 ADDs refused until the kernel's /128 routes can be read (a live pod's /128 could be handed out again)",
        );
      this.lastError = why;
      throw new IpamdFailure(IpamdCause.NotReady, `IPv6 ADD refused: the kernel's pod routes are unreadable: ${why}`);
    }
    const q = this.o.v6.adoptWired(wired);
    if (q.length > 0)
      await this.o
        .persistV6()
        .catch((e: Error) =>
          this.o.log.warn(
            { err: e.message },
            'IPv6 checkpoint write of the adopted /128s failed; the next write carries them',
          ),
        );
    this.adopted = q.length;
    this.done = true;
    this.o.log.info(
      {
        adopted: q.length,
        adoptedV6: q.filter((x) => x.address.includes(':')).length,
        wired: wired.length,
        prefix: this.o.v6.prefix,
        addresses: q.slice(0, 20).map((x) => x.address),
      },
      'IPv6: wired addresses no allocation holds quarantined (owner unknown, never handed out)',
    );
  }
}
