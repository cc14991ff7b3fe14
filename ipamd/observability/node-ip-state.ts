/**
 * What this node's `eni-ipam.io/IPAllocatable` condition and its opt-in taint should say,
 * decided from facts ipamd already holds in memory (pure: no I/O, no clock).
 *
 * The condition is **False** only when the node can serve no new pod now: no address is
 * available, none cooling frees within an ADD's bounded wait, and the pool cannot grow
 * (the subnet is full, an ENI limit binds, or the pool is not managed). It is **True**
 * otherwise, and its reason still names what an operator should know: the pool cannot
 * grow any more (`SubnetFull`, `EniLimitReached`) or releases are frozen
 * (`ReleasesFrozen`), else `IPsAvailable`. With custom networking, an ENIConfig that is
 * missing, invalid or unreadable names the condition (`ENIConfigMissing`,
 * `ENIConfigInvalid`, `ENIConfigUnknown`) — False when only a new ENI could serve, True
 * with that reason while addresses remain; an unreadable one never taints.
 *
 * The taint is wanted exactly when the condition is False for a reason the node's own
 * evidence proves: it is **never** wanted because releases are frozen from missing
 * evidence. A freeze stops releases, not ADDs; when the only addresses that could serve
 * are held by the freeze (unverified or releasing while a source is unreadable), the
 * shortage may be an artefact of the missing source, so the condition is False with
 * reason `ReleasesFrozen` and no taint is placed.
 */

/** Why grow is blocked, as the pool controller classifies it. */
export type GrowBlockKind =
  'not_managed' | 'subnet_full' | 'eni_limit' | 'eniconfig_missing' | 'eniconfig_invalid' | 'eniconfig_unknown';

/** Reasons of the condition (CamelCase, as Kubernetes condition reasons are). */
export type IpConditionReason =
  | 'IPsAvailable'
  | 'SubnetFull'
  | 'EniLimitReached'
  | 'PoolNotManaged'
  | 'ReleasesFrozen'
  | 'ENIConfigMissing'
  | 'ENIConfigInvalid'
  | 'ENIConfigUnknown';

/** The facts the decision reads (a snapshot). */
export interface NodeIpFacts {
  /** CNI STATUS's answer (service/status.ts): an ADD can get an address now or within its wait. */
  canServe: boolean;
  /** CNI STATUS's message (counts and the blocked reason). */
  serveMessage: string;
  /** Addresses available now. */
  available: number;
  /** Why the pool cannot add one more address, or undefined when it can. */
  growBlocked?: { kind: GrowBlockKind; reason: string };
  /**
   * Custom networking: why no new ENI may be created (the ENIConfig is missing, invalid or
   * unreadable), even while addresses remain; named by the condition when nothing else binds.
   */
  eniConfigBlocked?: { kind: 'eniconfig_missing' | 'eniconfig_invalid' | 'eniconfig_unknown'; reason: string };
  /** Releases are frozen (release gate). */
  frozen: boolean;
  /** The gate's reasons, `"<source>: <reason>"`. */
  freezeReasons: string[];
  /** Addresses a freeze keeps from serving (unverified + releasing) while frozen; 0 when not frozen. */
  heldByFreeze: number;
}

/** The decision. */
export interface NodeIpState {
  /** The condition's status. */
  allocatable: boolean;
  reason: IpConditionReason;
  /** Operator-facing message (at most {@link MAX_MESSAGE} characters). */
  message: string;
  /** The node can serve no new pod on its own evidence: the taint is wanted (when the feature is on). */
  taint: boolean;
}

/** Longest condition/event message (events.k8s.io caps a note at 1 KiB). */
export const MAX_MESSAGE = 1024;

const GROW_REASON: Record<GrowBlockKind, IpConditionReason> = {
  not_managed: 'PoolNotManaged',
  subnet_full: 'SubnetFull',
  eni_limit: 'EniLimitReached',
  eniconfig_missing: 'ENIConfigMissing',
  eniconfig_invalid: 'ENIConfigInvalid',
  eniconfig_unknown: 'ENIConfigUnknown',
};

function cut(s: string): string {
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 1)}…` : s;
}

/** Decides the condition and the taint from `f`; see the module docstring. */
export function nodeIpState(f: NodeIpFacts): NodeIpState {
  const frozenNote = f.frozen ? `; releases frozen (${f.freezeReasons.join('; ') || 'no reason given'})` : '';
  const growNote = f.growBlocked ? `; the pool cannot grow: ${f.growBlocked.reason}` : '';
  if (!f.canServe) {
    if (f.frozen && f.heldByFreeze > 0) {
      return {
        allocatable: false,
        reason: 'ReleasesFrozen',
        taint: false,
        message: cut(
          `no IP can be served now: ${f.heldByFreeze} addresses are held until releases unfreeze${growNote}${frozenNote}`,
        ),
      };
    }
    const reason = f.growBlocked ? GROW_REASON[f.growBlocked.kind] : 'PoolNotManaged';
    // An ENIConfig that cannot be read is missing evidence, not the node's own: no taint for it.
    const taint = f.growBlocked?.kind !== 'eniconfig_unknown';
    return { allocatable: false, reason, taint, message: cut(`${f.serveMessage}${frozenNote}`) };
  }
  // A broken ENIConfig is named first while addresses remain: the operator must fix it before the next ENI is needed.
  if (f.eniConfigBlocked)
    return {
      allocatable: true,
      reason: GROW_REASON[f.eniConfigBlocked.kind],
      taint: false,
      message: cut(
        `${f.serveMessage}; ${f.eniConfigBlocked.reason}${f.growBlocked && !f.growBlocked.kind.startsWith('eniconfig') ? growNote : ''}${frozenNote}`,
      ),
    };
  if (f.growBlocked)
    return {
      allocatable: true,
      reason: GROW_REASON[f.growBlocked.kind],
      taint: false,
      message: cut(`${f.serveMessage}${growNote}${frozenNote}`),
    };
  if (f.frozen)
    return {
      allocatable: true,
      reason: 'ReleasesFrozen',
      taint: false,
      message: cut(`${f.serveMessage}${frozenNote}`),
    };
  return { allocatable: true, reason: 'IPsAvailable', taint: false, message: cut(f.serveMessage) };
}

/** The condition type ipamd owns on its Node. */
export const CONDITION_TYPE = 'eni-ipam.io/IPAllocatable';

/** The opt-in taint's key and effect. */
export const EXHAUSTED_TAINT = { key: 'eni-ipam.io/no-ip-available', effect: 'NoSchedule' } as const;

/** A core/v1 NodeCondition as patched (timestamps RFC 3339). */
export interface NodeConditionBody {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastHeartbeatTime: string;
  lastTransitionTime: string;
}

/**
 * The condition to write for `s` at `nowIso`, given the one on the Node (`prev`, if any):
 * lastTransitionTime moves only when the status changes (Kubernetes API conventions,
 * "Typical status properties"); lastHeartbeatTime is always now.
 */
export function conditionBody(
  s: NodeIpState,
  prev: { status?: string; lastTransitionTime?: string } | undefined,
  nowIso: string,
): NodeConditionBody {
  const status = s.allocatable ? 'True' : 'False';
  const keep = prev?.status === status && prev.lastTransitionTime;
  return {
    type: CONDITION_TYPE,
    status,
    reason: s.reason,
    message: s.message,
    lastHeartbeatTime: nowIso,
    lastTransitionTime: keep ? prev.lastTransitionTime! : nowIso,
  };
}

/** A core/v1 Taint. */
export interface TaintBody {
  key: string;
  value?: string;
  effect: string;
  timeAdded?: string;
}

/**
 * The Node's taint list with ours added (`want`) or removed, or undefined when it already
 * is as wanted. Other taints are kept as they are, in order.
 */
export function taintsWith(
  current: readonly TaintBody[] | undefined,
  want: boolean,
  nowIso: string,
): TaintBody[] | undefined {
  const list = current ?? [];
  const ours = (t: TaintBody) => t.key === EXHAUSTED_TAINT.key && t.effect === EXHAUSTED_TAINT.effect;
  const has = list.some(ours);
  if (has === want) return undefined;
  return want
    ? [...list, { key: EXHAUSTED_TAINT.key, effect: EXHAUSTED_TAINT.effect, timeAdded: nowIso }]
    : list.filter((t) => !ours(t));
}
