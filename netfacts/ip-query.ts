/**
 * Reads kernel state with iproute2's JSON output: several `show` commands in one
 * `ip -json -batch -` process (one JSON array per command, one per line), optionally
 * inside a netns entered by path with `nsenter --net=<path>`. Only commands that list
 * (never fail for a missing object) belong here, so the lines map 1:1 to the commands.
 * Also runs best-effort delete batches (`ip -force -batch -`).
 */
import { LOCAL_IP, type IpRunner } from './ip-batch.js';

/** One object of iproute2's JSON output (`ip -j addr|route|neigh|rule|link show`). */
export type IpJson = Record<string, unknown>;

/**
 * Runs the listing commands `shows` (e.g. `['addr show', 'route show']`) in one process,
 * inside `netnsPath` when given, with `ip` (default forked from this thread). `family`
 * `inet6` lists IPv6 objects (`ip -6`: without it `route show` lists IPv4 routes only,
 * even for `exact <ipv6>/128`).
 * @returns one array of objects per command, in order.
 * @throws Error with iproute2's/nsenter's message when the process fails (e.g. the netns
 *   path cannot be entered) or the output does not have one JSON array per command.
 */
export async function ipShow(
  shows: string[],
  netnsPath?: string,
  ip: IpRunner = LOCAL_IP,
  family?: 'inet6',
): Promise<IpJson[][]> {
  const r = await ip.runIp(family ? ['-json', '-6'] : ['-json'], shows, netnsPath, true);
  if (r.code !== 0)
    throw new Error(
      `ip -json -batch (${shows.join('; ')})${netnsPath ? ` in ${netnsPath}` : ''} exited ${r.code}: ${r.stderr.trim() || '(no message)'}`,
    );
  const out = r.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as IpJson[]);
  if (out.length !== shows.length || !out.every(Array.isArray))
    throw new Error(`unexpected output of ip -json -batch (${shows.join('; ')}): ${r.stdout.slice(0, 200)}`);
  return out;
}

/** Messages meaning "already gone", which a best-effort delete ignores. */
const GONE = /No such file or directory|Cannot find device|does not exist|No such process/i;

/**
 * Runs delete commands with `ip -force -batch -` (every line is tried even after one
 * fails), in the current netns or the one at `netnsPath`. Failures because the object
 * is already gone are ignored. `ip` as for {@link ipShow}.
 * @returns the other failures' messages (empty when everything went or was gone).
 */
export async function ipDeleteAll(lines: string[], netnsPath?: string, ip: IpRunner = LOCAL_IP): Promise<string[]> {
  if (lines.length === 0) return [];
  const r = await ip.runIp(['-force'], lines, netnsPath);
  if (r.code === 0) return [];
  return r.stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !GONE.test(l) && !/^Command failed/.test(l));
}
