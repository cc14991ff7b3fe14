/**
 * V8 flags and malloc settings for a small resident set without slowing the request path
 * (docs/design.md#16-footprint-and-latency). main.ts imports this module first.
 *
 * The image's entrypoint (/app/bin/ipamd, scripts/image/stage.mjs) passes
 * {@link IPAMD_NODE_FLAGS} on node's command line — `--max-semi-space-size` (MiB) only takes
 * effect there, and Node refuses it in NODE_OPTIONS — and exports {@link IPAMD_MALLOC_ENV}
 * (glibc malloc otherwise keeps the parser's freed memory of the SDK and Kubernetes client
 * imports: ~25 MiB). A direct `node dist/ipamd/main.js` runs with V8's defaults.
 *
 * `--max-old-space-size=128` (MiB): V8 sizes its old generation's headroom by this limit, so
 * it collects sooner and the resident set stays lower (`bench/ipamd-rss --quick`, same
 * session, 250 held: 96.6 → 89.9 MiB; after 30 s of churn 96.4 → 89.1) for little CPU
 * (`bench/ipamd-rpc-throughput`, 64 clients: 0.20 → 0.23–0.25 ms of ipamd CPU per pair,
 * pairs/s the same within the noise). ipamd's live heap at 250 allocations is a fraction
 * of it; a heap that outgrew it would end the process as the chart's 192Mi memory limit
 * (which it sits just under, with the binary's ~45 MiB of file-backed pages) would.
 *
 * `--optimize-for-size` is not set: it cost ~45% more of ipamd's CPU per ADD+DEL pair at
 * 64 clients (`bench/ipamd-rpc-throughput`, 0.45 → 0.20 ms without it, same session) for a
 * few MiB of RSS (`bench/ipamd-rss`; figures in docs/design.md#16-footprint-and-latency).
 * To compare: `bench/ipamd-rss --node-flag=--optimize-for-size` (added to these flags), or
 * `bench/ipamd-rpc-throughput --node-flags='--max-semi-space-size=1 --max-old-space-size=128
 * --optimize-for-size'` (its `--node-flags` replace these).
 */

/** The flags the image's entrypoint passes to node before main.js. */
export const IPAMD_NODE_FLAGS = ['--max-semi-space-size=1', '--max-old-space-size=128'];

/** The glibc malloc settings the image's entrypoint exports (man 3 mallopt: M_ARENA_MAX, M_TRIM_THRESHOLD, M_MMAP_THRESHOLD). */
export const IPAMD_MALLOC_ENV = {
  MALLOC_ARENA_MAX: '1',
  MALLOC_TRIM_THRESHOLD_: '65536',
  MALLOC_MMAP_THRESHOLD_: '65536',
};
