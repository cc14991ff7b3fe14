/**
 * Whether a long-lived helper child (eni-ipam-spawn, eni-ipam-netlink) keeps this process
 * alive: an idle helper must not (ipamd's own sockets do), one with requests waiting must.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';

/** `ref()`s (`on`) or `unref()`s the child and its three pipes. Throws nothing. */
export function holdChild(p: ChildProcessWithoutNullStreams, on: boolean): void {
  for (const h of [p, p.stdin, p.stdout, p.stderr] as unknown as Array<{ ref?: () => void; unref?: () => void }>)
    if (on) h.ref?.();
    else h.unref?.();
}
