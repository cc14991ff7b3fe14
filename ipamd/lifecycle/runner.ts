/**
 * The parts runner: each part of a process names the parts it needs and what it provides;
 * {@link startParts} starts them one at a time in dependency order (the declared order
 * wherever the needs allow), and stops them in reverse: on {@link RunningParts.stop}, or
 * at once when a start fails part way, stopping exactly the parts that had started
 * (docs/design.md#18-a-declared-lifecycle).
 *
 * A part that throws while starting or stopping is named in one log line with its error.
 * A stop that throws does not keep the parts before it from stopping.
 */

/** The log the runner writes to (a pino logger fits). */
export interface PartsLog {
  error(obj: object, msg: string): void;
}

/** What a started part provides, and how it stops (nothing to stop: omit `stop`). */
export interface Started<V> {
  value: V;
  /** Stops the part; `opts` is what {@link RunningParts.stop} was given. */
  stop?: (opts: StopOptions) => Promise<void> | void;
}

/** What a stop is given: how long a part may let work in flight finish (ms). */
export interface StopOptions {
  graceMs: number;
}

/**
 * One part. `R` maps every part's name to what it provides; `start` gets what the parts
 * named in `needs` provided.
 */
export interface Part<R, K extends keyof R = keyof R, N extends keyof R = keyof R> {
  name: K;
  needs: readonly N[];
  start(got: Pick<R, N>): Promise<Started<R[K]>> | Started<R[K]>;
}

/** Any part of registry `R` (what {@link startParts} takes). */
export type AnyPart<R> = { [K in keyof R]: Part<R, K, keyof R> }[keyof R];

/**
 * Declares a part of registry `R` with its types checked: `start` may read only what
 * `needs` names. Curried so that `K` and `N` are inferred: `partOf<R>()({ … })`.
 */
export function partOf<R>() {
  return <K extends keyof R, N extends keyof R>(p: Part<R, K, N>): AnyPart<R> => p as unknown as AnyPart<R>;
}

/** Started parts. */
export interface RunningParts<R> {
  /** What part `name` provided. @throws Error if it is not running. */
  get<K extends keyof R>(name: K): R[K];
  /** The names of the started parts, in start order. */
  readonly started: readonly (keyof R)[];
  /**
   * Stops every started part in reverse start order, once (later calls share the first).
   * @throws the first stop error, after every other part was stopped.
   */
  stop(opts: StopOptions): Promise<void>;
}

/** Options of {@link startParts}. */
export interface StartOptions<R> {
  log: PartsLog;
  /** Given to the parts' stops when a start fails part way. */
  failedStartStop: StopOptions;
  /** Test only: the start of this part throws instead of running (nothing of it starts). */
  failAt?: keyof R | undefined;
}

/**
 * The start order of `parts`: each part after every part it needs, otherwise in the
 * declared order. Pure.
 * @throws Error naming a duplicate part, a need no part provides, or a cycle.
 */
export function startOrder<R>(parts: readonly AnyPart<R>[]): AnyPart<R>[] {
  const byName = new Map<keyof R, AnyPart<R>>();
  for (const p of parts) {
    if (byName.has(p.name)) throw new Error(`part ${String(p.name)} is declared twice`);
    byName.set(p.name, p);
  }
  for (const p of parts)
    for (const n of p.needs)
      if (!byName.has(n)) throw new Error(`part ${String(p.name)} needs ${String(n)}, which no part provides`);
  const order: AnyPart<R>[] = [];
  const placed = new Set<keyof R>();
  while (order.length < parts.length) {
    const next = parts.find((p) => !placed.has(p.name) && p.needs.every((n) => placed.has(n)));
    if (!next) {
      const left = parts.filter((p) => !placed.has(p.name)).map((p) => String(p.name));
      throw new Error(`parts need each other in a cycle: ${left.join(', ')}`);
    }
    order.push(next);
    placed.add(next.name);
  }
  return order;
}

/**
 * Starts `parts` in {@link startOrder}. When a part's start throws, the parts already
 * started are stopped in reverse order and the error is thrown again, unchanged.
 * @throws what {@link startOrder} throws, or the failing part's start error.
 */
export async function startParts<R>(parts: readonly AnyPart<R>[], o: StartOptions<R>): Promise<RunningParts<R>> {
  const order = startOrder(parts);
  const values = new Map<keyof R, unknown>();
  const stops: Array<{ name: keyof R; stop: NonNullable<Started<unknown>['stop']> }> = [];
  const started: (keyof R)[] = [];
  let stopping: Promise<void> | undefined;
  const stopAll = (opts: StopOptions) => (stopping ??= stopInReverse(stops, opts, o.log));
  for (const p of order) {
    let s: Started<unknown>;
    try {
      if (o.failAt === p.name) throw new Error(`part ${String(p.name)} failed on purpose (test)`);
      const got = Object.fromEntries(p.needs.map((n) => [n, values.get(n)])) as Pick<R, keyof R>;
      s = await p.start(got);
    } catch (e) {
      o.log.error({ part: String(p.name), err: (e as Error).message }, 'ipamd part failed to start');
      await stopAll(o.failedStartStop).catch(() => undefined); // each stop error is logged
      throw e;
    }
    values.set(p.name, s.value);
    started.push(p.name);
    if (s.stop) stops.push({ name: p.name, stop: s.stop });
  }
  return {
    get: <K extends keyof R>(name: K): R[K] => {
      if (!values.has(name)) throw new Error(`part ${String(name)} is not running`);
      return values.get(name) as R[K];
    },
    started,
    stop: stopAll,
  };
}

async function stopInReverse<R>(
  stops: ReadonlyArray<{ name: keyof R; stop: NonNullable<Started<unknown>['stop']> }>,
  opts: StopOptions,
  log: PartsLog,
): Promise<void> {
  let first: unknown;
  for (const { name, stop } of [...stops].reverse()) {
    try {
      await stop(opts);
    } catch (e) {
      log.error({ part: String(name), err: (e as Error).message }, 'ipamd part failed to stop');
      first ??= e;
    }
  }
  if (first !== undefined) throw first;
}

/**
 * `fn`, run at most once: later calls get the first call's promise (a close both a drain
 * and a part's own stop may call).
 */
export function onceOnly<A extends unknown[]>(fn: (...a: A) => Promise<void>): (...a: A) => Promise<void> {
  let first: Promise<void> | undefined;
  return (...a: A) => (first ??= fn(...a));
}
