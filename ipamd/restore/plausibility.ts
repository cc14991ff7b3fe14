/**
 * Plausibility before trust (docs/design.md#4-restore-after-restart rule 5), pure: a source that answers is not yet a
 * source that is right. The seed outage was a *reachable wrong* runtime (the containerd
 * socket mounted while kubelet used docker) answering "no sandboxes", and every pod was
 * declared dead. A read is **suspect** (its "gone" is not believed; releases freeze) when:
 *
 * - **coverage**: the kernel shows pod veths for at least {@link SUSPECT_MIN_BASE}
 *   addresses this ipamd holds, and the source knows fewer than a quarter of them
 *   ({@link SUSPECT_MAX_KNOWN_FRACTION}). A right runtime lists a READY sandbox for
 *   every wired pod whatever its age: for the runtime the addresses judged are every
 *   kernel-wired allocation made at least {@link SANDBOX_LISTED_WITHIN_MS} before the
 *   reads began (or the GC grace, if shorter), and, without a checkpoint, the unverified
 *   IPs. A wired allocation's ADD was served (the kernel shows its wiring), and containerd
 *   lists the sandbox once its pause container started, right after the ADD
 *   (internal/cri/server/sandbox_run.go: sandboxStore.Add after StartSandbox), so only the
 *   last seconds' ADDs are left out. A right Kubernetes source lists every pod bound to the
 *   node, but its pod's IP only once the kubelet reported it: for Kubernetes the addresses
 *   judged are the wired allocations older than the GC grace (and the unverified IPs).
 * - **identity** (runtime only): the CRI `Version` answer (runtime name and version)
 *   differs from the node's `status.nodeInfo.containerRuntimeVersion` (kubelet builds it
 *   as `<runtime_name>://<runtime_version>` from the same RPC), or from the identity this
 *   boot's checkpoint recorded — unless the runtime proves itself by knowing every one of
 *   (at least one) kernel-wired allocations, as after an in-place runtime upgrade, or
 *   nothing is at stake (no allocation older than the grace, no wired pod).
 *
 * A suspect source still vouches: what it lists is kept live. Only its silence is ignored.
 */

/** Runtime identity from CRI `Version` (`runtime_name`, `runtime_version`). */
export interface RuntimeIdentity {
  name: string;
  version: string;
}

/**
 * How long after its ADD a right runtime may still not list a sandbox (ms): containerd adds
 * it to its list once the pause container started (CreateSandbox, the pause image check,
 * StartSandbox after the CNI ADD), under a second on an idle node, seconds on a loaded one.
 * A wired allocation older than this that the runtime does not know counts against it in
 * the coverage rule, whatever the GC grace (a false suspicion only holds releases until a
 * pass finds the runtime knows its sandboxes).
 */
export const SANDBOX_LISTED_WITHIN_MS = 10_000;

/** Fewest kernel-wired held addresses for the coverage rule to judge a source. */
export const SUSPECT_MIN_BASE = 2;
/** A source knowing fewer than this fraction of the kernel-wired held addresses is suspect. */
export const SUSPECT_MAX_KNOWN_FRACTION = 0.25;

/** `containerd 1.6.20` — the identity as people write it. */
export function formatIdentity(id: RuntimeIdentity | undefined): string {
  return id ? `${id.name} ${id.version}`.trim() : 'identity unknown';
}

/** `containerd://1.6.20` (as kubelet reports `containerRuntimeVersion`) → identity; undefined when not of that shape. */
export function parseNodeRuntimeVersion(s: string | undefined): RuntimeIdentity | undefined {
  if (!s) return undefined;
  const i = s.indexOf('://');
  if (i <= 0) return undefined;
  return { name: s.slice(0, i), version: s.slice(i + 3) };
}

/**
 * The runtime version as the kubelet writes it into `status.nodeInfo.containerRuntimeVersion`:
 * parsed as a semantic version (`v?MAJOR.MINOR.PATCH[-pre][+build]`), else as a generic one
 * (`v?N(.N)*`, anything after the numbers dropped), then printed without the `v`. So CRI's
 * `v2.4.2` is `2.4.2` and Debian's `1.6.20~ds1` is `1.6.20`. Source: kubelet's
 * pkg/kubelet/kuberuntime/kuberuntime_manager.go newRuntimeVersion and
 * k8s.io/apimachinery/pkg/util/version (Version.String). Unparseable input is returned as is.
 */
export function kubeletRuntimeVersion(v: string): string {
  const m = /^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)$/.exec(v);
  if (!m) return v;
  const nums = m[1]!.split('.').map((n) => String(Number(n)));
  const extra = /^(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\s*$/.exec(m[2]!);
  if (nums.length === 3 && extra)
    return `${nums.join('.')}${extra[1] ? `-${extra[1]}` : ''}${extra[2] ? `+${extra[2]}` : ''}`;
  return nums.length >= 2 ? nums.join('.') : v;
}

/** True when both identities name the same runtime and version. */
export function sameIdentity(a: RuntimeIdentity, b: RuntimeIdentity): boolean {
  return a.name === b.name && a.version === b.version;
}

/** What the coverage rule found for one source. */
export interface Coverage {
  /** Kernel-wired held addresses the rule judges on. */
  base: number;
  /** Of those, how many the source knows. */
  known: number;
  /** True when the source is suspect by coverage. */
  suspect: boolean;
}

/** Applies the coverage rule: `known` of `base` kernel-wired held addresses. */
export function coverage(base: number, known: number): Coverage {
  return { base, known, suspect: base >= SUSPECT_MIN_BASE && known < base * SUSPECT_MAX_KNOWN_FRACTION };
}

/** Inputs of {@link runtimeIdentityVerdict}. */
export interface IdentityInput {
  /** The runtime's answer to `Version`; undefined when it did not answer it (old runtime, stand-in). */
  runtime?: RuntimeIdentity;
  /** `status.nodeInfo.containerRuntimeVersion` of this node, when the Kubernetes source read it. */
  nodeRuntimeVersion?: string;
  /** The identity this boot's checkpoint recorded, if any. */
  recorded?: RuntimeIdentity;
  /** The runtime's coverage of kernel-wired allocations (proves a same-runtime upgrade). */
  cov: Coverage;
  /** Allocations older than the GC grace (what a lie could release); 0 means nothing is at stake. */
  heldOld: number;
}

/**
 * The identity rule. @returns the reason the runtime is suspect, or undefined.
 * An unknown runtime identity is never suspect by itself (the coverage rule still applies).
 */
export function runtimeIdentityVerdict(endpoint: string, i: IdentityInput): string | undefined {
  if (!i.runtime) return undefined;
  const node = parseNodeRuntimeVersion(i.nodeRuntimeVersion);
  // The kubelet writes the version in its own normal form (kubeletRuntimeVersion).
  const asKubelet = { name: i.runtime.name, version: kubeletRuntimeVersion(i.runtime.version) };
  if (node && !sameIdentity(node, asKubelet) && !sameIdentity(node, i.runtime)) {
    return `runtime at ${endpoint} is ${formatIdentity(i.runtime)} but the node reports ${i.nodeRuntimeVersion} (status.nodeInfo.containerRuntimeVersion): kubelet uses another runtime`;
  }
  // Proven: it knows every kernel-wired pod, or nothing it could wrongly release exists.
  const proven = (i.cov.base >= 1 && i.cov.known === i.cov.base) || (i.cov.base === 0 && i.heldOld === 0);
  if (i.recorded && !sameIdentity(i.recorded, i.runtime) && !proven && !node) {
    return `runtime at ${endpoint} is ${formatIdentity(i.runtime)} but this boot's checkpoint recorded ${formatIdentity(i.recorded)}, and it does not know the sandboxes the kernel shows wired`;
  }
  return undefined;
}
