/**
 * Who holds one of ipamd's one-per-node guards (docs/design.md#one-ipamd-per-node): the
 * record the holder publishes (one JSON line: on the instance guard's abstract socket,
 * node-guard.ts, and in the state directory's lock file, checkpoint-lock.ts), and the one
 * line a second ipamd exits with, naming it.
 */
import { readlinkSync } from 'node:fs';

/** What a holder tells a second ipamd about itself. */
export interface GuardHolder {
  pid: number;
  /** Its network namespace as `readlink /proc/self/ns/net` prints it, e.g. `net:[4026531840]`; '' if unreadable. */
  netns?: string;
  /** The EC2 instance it manages (read from IMDS before any guard is taken); absent for in-process daemons. */
  instanceId?: string;
  /** Its DaemonSet, `<namespace>/<name>` (ENI_IPAM_DAEMONSET, set by the chart); absent outside a cluster. */
  daemonSet?: string;
  /** ENI_IPAM_SOCKET, ENI_IPAM_CHECKPOINT_PATH and AWS_VPC_K8S_CNI_LOG_FILE of the holder. */
  socket: string;
  checkpoint: string;
  logFile: string;
  /** When it took the guard (ISO 8601). */
  since: string;
}

/** This process's network namespace (`net:[<inode>]`), or '' when /proc cannot say. */
export function ownNetns(): string {
  try {
    return readlinkSync('/proc/self/ns/net');
  } catch {
    return '';
  }
}

/**
 * The record this ipamd publishes: its pid and network namespace, now as `since`, and `p`.
 */
export function selfHolder(p: Omit<GuardHolder, 'pid' | 'netns' | 'since'>): GuardHolder {
  return { pid: process.pid, netns: ownNetns(), since: new Date().toISOString(), ...p };
}

/** Parses a holder record (the first line of `text`); undefined when it is not one. */
export function parseHolder(text: string): GuardHolder | undefined {
  try {
    const h = JSON.parse(text.split('\n')[0] ?? '') as Partial<GuardHolder>;
    return typeof h?.pid === 'number' && typeof h.since === 'string' ? (h as GuardHolder) : undefined;
  } catch {
    return undefined;
  }
}

/** `pid 12, netns net:[…], DaemonSet kube-system/eni-ipam, instance i-…, socket …, checkpoint …, log …, since …`. */
export function holderWords(h: GuardHolder | 'silent'): string {
  if (h === 'silent') return 'a process that did not say which';
  return [
    `pid ${h.pid}`,
    h.netns ? `netns ${h.netns}` : undefined,
    h.daemonSet ? `DaemonSet ${h.daemonSet}` : undefined,
    h.instanceId ? `instance ${h.instanceId}` : undefined,
    `socket ${h.socket}`,
    `checkpoint ${h.checkpoint}`,
    `log ${h.logFile}`,
    `since ${h.since}`,
  ]
    .filter((w) => w !== undefined)
    .join(', ');
}

/**
 * The one line a second ipamd exits with: `another ipamd is running on this node (<holder>;
 * <where>): …`, where `where` names the guard that met it (the abstract socket, the lock file).
 */
export function describeHolder(where: string, h: GuardHolder | 'silent'): string {
  return `another ipamd is running on this node (${holderWords(h)}; ${where}): one ipamd per node, whatever its namespace or directories; stop it first (two would hand out each other's addresses)`;
}

/** Thrown when another ipamd holds a guard: the message is {@link describeHolder}'s line. */
export class GuardHeldError extends Error {
  constructor(
    where: string,
    readonly holder: GuardHolder | 'silent',
  ) {
    super(describeHolder(where, holder));
    this.name = 'GuardHeldError';
  }
}
