/**
 * A Kubernetes collection kept listed and watched ({@link WatchedList}), for the readers
 * that need one object or a few (the ENIConfig source: this node and the ENIConfigs; the
 * node's schedulability). Errors are one readable line (errors.ts).
 */
import {
  ADD,
  DELETE,
  ERROR,
  ListWatch,
  UPDATE,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from './client.js';
import type { Logger } from '../log.js';
import { describeApiCall, httpStatusOf } from './errors.js';
import { kubeIdentity } from './config.js';

/** Options of {@link WatchedList}; times in ms. */
export interface WatchedListOptions {
  /** Deadline of one list call. */
  listTimeoutMs: number;
  /** First retry delay after a failure (doubles up to `retryMaxMs`). */
  retryMinMs: number;
  retryMaxMs: number;
  log: Logger;
  /** Who reads, for the log lines (`ENIConfig source`). */
  source: string;
  /** What happens while the collection cannot be read, for the log line (`no ENI is created meanwhile`). */
  whileUnreadable: string;
  /** Called (synchronously, must not throw) after every change: objects, or readable/unreadable. */
  changed: () => void;
}

/**
 * One listed-and-watched collection: its objects, or why it cannot be read now. Lists,
 * then watches from the list's resourceVersion (relisting on 410) through
 * @kubernetes/client-node's ListWatch; a list that does not answer within `listTimeoutMs`
 * or a watch that fails makes it unreadable until a list succeeds again, retried with
 * back-off; each failure is logged once until it recovers.
 */
export class WatchedList {
  private lw?: ListWatch<KubernetesObject>;
  private error: string | undefined = 'not read yet';
  private timer?: NodeJS.Timeout;
  private backoffMs = 0;
  private stopped = false;
  private logged = false;

  constructor(
    private readonly kc: KubeConfig,
    private readonly what: string,
    private readonly path: string,
    private readonly list: () => Promise<KubernetesListObject<KubernetesObject>>,
    private readonly fieldSelector: string | undefined,
    private readonly o: WatchedListOptions,
  ) {}

  /** Starts listing and watching (idempotent). */
  start(): void {
    if (!this.lw && !this.timer && !this.stopped) this.open();
  }

  /** Stops the watch and any retry. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    void this.lw?.stop();
    this.lw = undefined;
  }

  /** The objects as last listed and watched, or why they cannot be read now. */
  read(): { objects: readonly KubernetesObject[] } | { unreadable: string } {
    if (this.error !== undefined || !this.lw) return { unreadable: this.error ?? 'not started' };
    return { objects: this.lw.list() };
  }

  private open(): void {
    this.timer = undefined;
    const listed = async () => {
      let t: NodeJS.Timeout | undefined;
      try {
        const l = await Promise.race([
          this.list(),
          new Promise<never>((_, reject) => {
            t = setTimeout(
              () => reject(new Error(`list not answered within ${this.o.listTimeoutMs} ms`)),
              this.o.listTimeoutMs,
            );
          }),
        ]);
        // Readable again once the list's objects are in the cache (ListWatch inserts them after this returns).
        setImmediate(() => {
          if (this.stopped || this.lw !== lw) return;
          if (this.error !== undefined && this.logged)
            this.o.log.info({ what: this.what }, `${this.o.source}: readable again`);
          this.error = undefined;
          this.logged = false;
          this.backoffMs = 0;
          this.o.changed();
        });
        return l;
      } finally {
        clearTimeout(t);
      }
    };
    const lw = new ListWatch<KubernetesObject>(
      this.path,
      new Watch(this.kc),
      listed,
      false,
      undefined,
      this.fieldSelector,
    );
    const changed = () => {
      if (this.lw === lw) this.o.changed();
    };
    lw.on(ADD, changed);
    lw.on(UPDATE, changed);
    lw.on(DELETE, changed);
    lw.on(ERROR, (e: unknown) => this.fail(lw, e));
    this.lw = lw;
    lw.start().catch((e: unknown) => this.fail(lw, e));
  }

  private fail(lw: ListWatch<KubernetesObject>, e: unknown): void {
    if (this.stopped || this.lw !== lw) return;
    const status = httpStatusOf(e);
    const hint = status === 403 ? " (RBAC: ipamd needs list and watch on it; the chart's ClusterRole grants them)" : '';
    this.error = `${describeApiCall({ verb: 'list/watch', resource: this.what, identity: kubeIdentity(this.kc) }, e)}${hint}`;
    void lw.stop();
    this.lw = undefined;
    this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : this.o.retryMinMs, this.o.retryMaxMs);
    if (!this.logged) {
      this.logged = true;
      this.o.log.warn(
        { err: this.error, retryInMs: this.backoffMs },
        `${this.o.source}: cannot read; ${this.o.whileUnreadable}`,
      );
    }
    this.o.changed();
    this.timer = setTimeout(() => this.open(), this.backoffMs);
  }
}
