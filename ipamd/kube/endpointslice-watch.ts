/**
 * The I/O edge of the cooldown that ends on evidence (issue 41,
 * docs/design.md#cooldown-that-ends-on-evidence): lists every EndpointSlice of the cluster
 * (`GET /apis/discovery.k8s.io/v1/endpointslices`, paged) and watches from the list's
 * resourceVersion (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes),
 * keeping only addresses in an {@link EndpointIndex}. No slice object is cached.
 *
 * Safety: the index is synced only from the moment a list completed until the watch that
 * followed it ends for any reason (a clean close by the server, 410, an error, no answer
 * within the deadline, no close by `serverTimeoutSeconds` + 15 s). Every end makes it
 * unsynced, and the next list (retried with back-off) syncs it from that list's time:
 * the view never claims to have seen a span it did not watch.
 */
import { CustomObjectsApi, Watch, type KubeConfig } from './client.js';
import type { Logger } from '../log.js';
import { describeApiCall, httpStatusOf } from './errors.js';
import { kubeIdentity } from './config.js';
import type { EndpointIndex, SliceLike } from './endpoint-index.js';

/** Options of {@link EndpointSliceWatch}; times in ms unless named otherwise. */
export interface EndpointSliceWatchOptions {
  kc: KubeConfig;
  index: EndpointIndex;
  log: Logger;
  /** ipamd's monotonic clock (ms). */
  now: () => number;
  /** Called (synchronously, must not throw) after every change of the index or of its sync. */
  changed: () => void;
  /** Deadline of one list page, and of the watch's response headers. Default 10 s. */
  callTimeoutMs?: number;
  /** Objects per list page. Default 500. */
  pageSize?: number;
  /** The server ends each watch after about this long (s); a new list follows. Default 300. */
  serverTimeoutSeconds?: number;
  /** First retry delay after a failure (doubles up to `retryMaxMs`). Defaults 1 s and 30 s. */
  retryMinMs?: number;
  retryMaxMs?: number;
}

const GROUP = { group: 'discovery.k8s.io', version: 'v1', plural: 'endpointslices' } as const;
const PATH = '/apis/discovery.k8s.io/v1/endpointslices';
/** A watch that ends cleanly sooner than this (ms) counts as a failure (back-off), so nothing relists in a loop. */
const MIN_WATCH_MS = 5_000;

/** Rejects after `ms` unless `p` settles first. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>(
        (_, reject) => (t = setTimeout(() => reject(new Error(`${what} not answered within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(t);
  }
}

/** Lists and watches the cluster's EndpointSlices into an index; see the module docstring. */
export class EndpointSliceWatch {
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private abort?: () => void;
  private backoffMs = 0;
  private logged = false;

  constructor(private readonly o: EndpointSliceWatchOptions) {}

  /** Starts listing and watching (once). */
  start(): void {
    if (!this.stopped && !this.timer && !this.abort) this.cycle();
  }

  /** Stops the watch and any retry; the index is left unsynced. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort?.();
    this.o.index.lost();
  }

  private cycle(): void {
    this.timer = undefined;
    void this.listThenWatch().catch((e: unknown) => this.fail(e));
  }

  /** Lists every slice into the index page by page (no page kept); @returns the list's resourceVersion. */
  private async list(): Promise<string> {
    const api = this.o.kc.makeApiClient(CustomObjectsApi);
    const relist = this.o.index.relist();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = (await within(
        api.listClusterCustomObject({ ...GROUP, limit: this.o.pageSize ?? 500, _continue: cont }),
        this.o.callTimeoutMs ?? 10_000,
        'EndpointSlice list',
      )) as { items?: SliceLike[]; metadata?: { continue?: string; resourceVersion?: string } };
      if (this.stopped) return '';
      relist.add(page.items ?? [], this.o.now());
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont);
    if (!rv) throw new Error('EndpointSlice list without a resourceVersion');
    relist.finish(this.o.now());
    return rv;
  }

  private async listThenWatch(): Promise<void> {
    const resourceVersion = await this.list();
    if (this.stopped) return;
    if (this.logged) this.o.log.info('EndpointSlice watch: synced again; cooldowns may end on evidence');
    this.logged = false;
    this.backoffMs = 0;
    this.o.changed();
    const began = this.o.now();
    const end = await this.watch(resourceVersion);
    if (this.stopped) return;
    if (end) throw end;
    // A clean end (server timeout, 410): list again at once, unless the watch ended within
    // MIN_WATCH_MS (a server or proxy ending every watch at once): that backs off as a failure.
    if (this.o.now() - began < MIN_WATCH_MS) throw new Error(`watch ended after ${this.o.now() - began} ms`);
    this.o.index.lost();
    this.o.changed();
    this.cycle();
  }

  /** One watch from `rv`; resolves undefined on a clean end or 410, or the error that ended it. */
  private watch(rv: string): Promise<unknown> {
    const serverTimeout = this.o.serverTimeoutSeconds ?? 300;
    return new Promise<unknown>((resolve) => {
      let done = false;
      let req: { abort(): void } | undefined;
      const finish = (e: unknown) => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        clearTimeout(watchdog);
        this.abort = undefined;
        req?.abort();
        resolve(e);
      };
      this.abort = () => finish(undefined);
      const deadline = setTimeout(
        () => finish(new Error(`EndpointSlice watch not answered within ${this.o.callTimeoutMs ?? 10_000} ms`)),
        this.o.callTimeoutMs ?? 10_000,
      );
      // A stream the server never closes (a dead connection) counts as failed.
      const watchdog = setTimeout(
        () => finish(new Error(`EndpointSlice watch not closed by the server within ${serverTimeout + 15} s`)),
        (serverTimeout + 15) * 1000,
      );
      new Watch(this.o.kc)
        .watch(
          PATH,
          { resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds: serverTimeout },
          (type: string, obj: unknown) => {
            if (done) return;
            if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') {
              this.o.index.apply(type, obj as SliceLike, this.o.now());
              this.o.changed();
            } else if (type === 'ERROR') {
              const st = obj as { code?: number; message?: string };
              finish(st.code === 410 ? undefined : new Error(`ERROR event: ${st.message ?? JSON.stringify(obj)}`));
            }
          },
          (err: unknown) => finish(err && httpStatusOf(err) !== 410 ? err : undefined),
        )
        .then((c: { abort(): void }) => {
          req = c;
          if (done) return c.abort();
          clearTimeout(deadline);
        })
        .catch((e: unknown) => finish(e));
    });
  }

  private fail(e: unknown): void {
    if (this.stopped) return;
    this.o.index.lost();
    this.o.changed();
    const status = httpStatusOf(e);
    const hint =
      status === 403
        ? " (RBAC: ipamd needs list and watch on discovery.k8s.io endpointslices; the chart's ClusterRole grants them)"
        : '';
    const err = `${describeApiCall({ verb: 'list/watch', resource: 'endpointslices.discovery.k8s.io', identity: kubeIdentity(this.o.kc) }, e)}${hint}`;
    this.backoffMs = Math.min(
      this.backoffMs ? this.backoffMs * 2 : (this.o.retryMinMs ?? 1000),
      this.o.retryMaxMs ?? 30_000,
    );
    if (!this.logged) {
      this.logged = true;
      this.o.log.warn(
        { err, retryInMs: this.backoffMs },
        'EndpointSlice watch: cannot read; every cooldown runs its full IP_COOLDOWN_PERIOD meanwhile',
      );
    }
    this.timer = setTimeout(() => this.cycle(), this.backoffMs);
  }
}
