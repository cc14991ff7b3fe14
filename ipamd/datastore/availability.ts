/**
 * The datastore's one "addresses may have become available" listener (the pool loop's
 * waiting ADDs). Owned here so every part of the datastore that can free an address
 * (IPs or prefixes added, a release cancelled, addresses verified, an assignment rolled
 * back, a quarantine lifted) signals through one place. Pure; synchronous.
 */

/** Holds the listener set by {@link AvailabilitySignal.listen}; {@link AvailabilitySignal.notify} calls it. */
export class AvailabilitySignal {
  private listener?: () => void;

  /**
   * Sets the one listener (a later call replaces it), called synchronously after any
   * change that may have made an address available: IPs or /28 prefixes added, a release
   * reservation cancelled, unverified addresses verified, an assignment rolled back, a
   * quarantine lifted. Cooldown expiry is a matter of time and is not signalled. The
   * listener must not throw.
   */
  listen(fn: () => void): void {
    this.listener = fn;
  }

  /** Tells the listener, if any, that addresses may have become available. */
  notify(): void {
    this.listener?.();
  }
}
