/**
 * Client of `eni-ipam-netlink` (cni-plugin/netlink/eni-ipam-netlink.c), the long-lived
 * helper that wires pods over rtnetlink for ipamd's CNI exec server, so an ADD starts no
 * process: forking ipamd (two `ip` processes per ADD) was most of the shim's ADD
 * (docs/benchmarks.md). One helper process serves every ADD; requests are lines tagged with an
 * id, answered in order. The line format is the C file's docstring.
 *
 * If the helper exits, the requests waiting on it fail (the ADD reports CNI error 5 and
 * the runtime retries) and the next request starts a new one. When requests wait and the
 * helper answers none of them for {@link NETLINK_REQUEST_TIMEOUT_MS}, they all fail the same
 * way and the helper is killed (a stuck helper must not hold every later ADD). The deadline
 * runs from the helper's last answer, not from each request's sending: requests are answered
 * in order, and a burst of ADDs on a loaded node queued behind each other is progress, not a
 * stuck helper (3 nodes scaling to 150 pods at load 53 failed ADDs whose requests waited
 * 10 s in the queue while the helper kept answering).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { IpBatchError } from '../netfacts/ip-batch.js';
import { holdChild } from '../netfacts/child-ref.js';

/** errno of "no such device" (the helper's answer for a link that is not there). */
const ENODEV = 19;
/** errno of "no such device or address": the helper's answer for a link of that name with another MAC. */
const ENXIO = 6;

/** Default longest time without an answer while requests wait, ms (a request takes well under 1 ms when the kernel answers). */
export const NETLINK_REQUEST_TIMEOUT_MS = 10_000;

/** A veth pair to create: the pod netns path, both ends' names and MACs, the MTU (bytes). */
export interface VethRequest {
  netns: string;
  hostVeth: string;
  hostMac: string;
  ifName: string;
  podMac: string;
  mtu: number;
}

/** The requests of the helper; each resolves on `ok`. */
export interface NetlinkHelper {
  /**
   * Node: veth pair `hostVeth`/`ifName` (peer created in the pod netns), host end up;
   * pod: `lo` and peer up, gateway and default routes, gateway neighbour (replaced).
   * @throws IpBatchError (`stderr` names the step and the kernel's message, e.g. "link add: File exists").
   */
  veth(p: VethRequest): Promise<void>;
  /**
   * As {@link NetlinkHelper.veth} for an IPv6 (`ipv6`) or dual-stack (`dual`) pod: the pod
   * gets `::/0 via fe80::1` and a permanent neighbour fe80::1 → host MAC, and the IPv4
   * gateway routes and neighbour only for `dual`.
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  veth6(p: VethRequest & { family: 'ipv6' | 'dual' }): Promise<void>;
  /**
   * Node: route `<ipv4>/32 dev <hostVeth> scope link` added (EEXIST if present), the pod's
   * rules added (prio 512 to, and 1536 from for a table other than 254).
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  host(p: { hostVeth: string; ipv4: string; routeTableId: number }): Promise<void>;
  /**
   * Pod: `<ipv4>/32 dev <ifName>` replaced.
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  addr(p: { netns: string; ifName: string; ipv4: string }): Promise<void>;
  /**
   * Pod: `<ipv6>/128 dev <ifName> nodad` replaced (no duplicate address detection to wait for).
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  addr6(p: { netns: string; ifName: string; ipv6: string }): Promise<void>;
  /**
   * Node: route `<ipv6>/128 dev <hostVeth>` added (EEXIST if present), permanent neighbour
   * `<ipv6>` → `podMac` replaced.
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  host6(p: { hostVeth: string; ipv6: string; podMac: string }): Promise<void>;
  /**
   * Node: route `<ipv4>/32 dev <hostVeth> scope link` added (EEXIST if present), no rules
   * (the IPv4 egress pair of an IPv6 pod).
   * @throws IpBatchError as {@link NetlinkHelper.veth}.
   */
  route(p: { hostVeth: string; ipv4: string }): Promise<void>;
  /**
   * Node: deletes the link `name` (its peer and routes go with it); with `mac`, only when
   * the link has that MAC (deleted by its index: a link of that name with another MAC is
   * another sandbox's, veth-name.ts `hostVethNames`).
   * @returns true if it was deleted, false if there was no such device (or, with `mac`,
   *   none of that MAC).
   * @throws IpBatchError for any other failure.
   */
  delLink(name: string, mac?: string): Promise<boolean>;
  /**
   * Node: deletes the links `a` and `b` (an IPv6 pod's host veth and egress host veth) in
   * one kernel batch, half the time of two deletes; with `macs`, only links of those MACs
   * (as {@link NetlinkHelper.delLink}); on any failure (one absent or of another MAC
   * included) neither was deleted by it.
   * @throws IpBatchError naming the step.
   */
  delLinks(a: string, b: string, macs?: [string, string]): Promise<void>;
  /**
   * Node: deletes the rules {@link NetlinkHelper.host} adds for `ipv4` and `routeTableId`;
   * rules already gone are fine.
   * @returns the other failures' messages (empty when everything went or was gone).
   */
  delRules(p: { ipv4: string; routeTableId: number }): Promise<string[]>;
  /**
   * Starts the helper if it is not running and waits for its answer to a no-op.
   * @throws IpBatchError when it cannot run or does not answer.
   */
  ping(): Promise<void>;
  /** Ends the helper (its stdin closed); waiting requests fail. */
  close(): void;
}

/** A field of a request: no whitespace (the separator) and not empty. */
const field = (what: string, v: string | number): string => {
  const s = String(v);
  if (!s || /\s/.test(s)) throw new IpBatchError(['eni-ipam-netlink'], null, `invalid ${what}: ${JSON.stringify(s)}`);
  return s;
};

/**
 * A stdout `data` handler splitting the helper's answers (`<id> ok` or `<id> err <errno>
 * <message>`, one per line, possibly split across chunks) into `answer(id)` /
 * `answer(id, errno, message)`; other lines are ignored.
 */
function answerLines(answer: (id: number, errno?: number, message?: string) => void): (d: string) => void {
  let out = '';
  return (d) => {
    out += d;
    for (let nl = out.indexOf('\n'); nl >= 0; nl = out.indexOf('\n')) {
      const m = /^(\d+) (ok|err (\d+) (.*))$/.exec(out.slice(0, nl));
      out = out.slice(nl + 1);
      if (!m) continue;
      if (m[2] === 'ok') answer(Number(m[1]));
      else answer(Number(m[1]), Number(m[3]), m[4]);
    }
  };
}

/**
 * Starts the helper at `helperPath` (lazily, on the first request; again after it
 * exited), entering the node netns at `nodeNetns` (default: ipamd's own). `o.timeoutMs`:
 * longest time (ms) without an answer while requests wait (default {@link NETLINK_REQUEST_TIMEOUT_MS}).
 */
export function netlinkHelper(helperPath: string, nodeNetns?: string, o: { timeoutMs?: number } = {}): NetlinkHelper {
  let child: ChildProcessWithoutNullStreams | undefined;
  let nextId = 1;
  const waiting = new Map<number, { argv: string[]; resolve: () => void; reject: (e: Error) => void }>();
  let closed = false;
  const timeoutMs = o.timeoutMs ?? NETLINK_REQUEST_TIMEOUT_MS;

  // An idle helper does not keep the process running (ipamd's sockets do); one with requests waiting does.
  const hold = holdChild;
  const settle = (id: number) => {
    waiting.delete(id);
    if (waiting.size === 0 && child) hold(child, false);
  };
  // The progress deadline: armed while requests wait, restarted by each answer.
  let stall: NodeJS.Timeout | undefined;
  const armStall = (p: ChildProcessWithoutNullStreams) => {
    clearTimeout(stall);
    stall = undefined;
    if (waiting.size === 0) return;
    stall = setTimeout(() => {
      for (const [id, w] of waiting) {
        settle(id);
        w.reject(new IpBatchError(w.argv, null, `eni-ipam-netlink did not answer within ${timeoutMs} ms`));
      }
      p.kill('SIGKILL'); // the next request starts a new one
    }, timeoutMs);
    stall.unref();
  };

  const start = (): ChildProcessWithoutNullStreams => {
    const p = spawn(helperPath, nodeNetns ? [nodeNetns] : [], { stdio: ['pipe', 'pipe', 'pipe'] });
    let err = '';
    p.stdout.setEncoding('utf8').on(
      'data',
      answerLines((id, errno, message) => {
        const w = waiting.get(id);
        if (!w) return;
        settle(id);
        armStall(p);
        if (errno === undefined) w.resolve();
        else w.reject(new IpBatchError(w.argv, errno, `RTNETLINK answers: ${message}`));
      }),
    );
    p.stderr.setEncoding('utf8').on('data', (d: string) => {
      err = (err + d).slice(-2000);
    });
    p.stdin.on('error', () => undefined); // it exited: reported below
    const gone = (why: string) => {
      if (child === p) child = undefined;
      clearTimeout(stall);
      for (const [id, w] of waiting) {
        settle(id);
        w.reject(new IpBatchError(w.argv, null, `eni-ipam-netlink ${why}${err ? `: ${err.trim()}` : ''}`));
      }
    };
    p.on('error', (e) => gone(`could not run (${e.message})`));
    p.on('exit', (code, signal) => gone(`exited (${signal ?? code})`));
    hold(p, waiting.size > 0);
    return p;
  };

  const request = (fields: string[]): Promise<void> => {
    if (closed) return Promise.reject(new IpBatchError(['eni-ipam-netlink', ...fields], null, 'helper closed'));
    child ??= start();
    const id = nextId++;
    const argv = ['eni-ipam-netlink', ...fields];
    const p = child;
    return new Promise<void>((resolve, reject) => {
      waiting.set(id, { argv, resolve, reject });
      if (waiting.size === 1) {
        hold(p, true);
        armStall(p);
      }
      p.stdin.write(`${id} ${fields.join(' ')}\n`);
    });
  };

  return {
    ...helperVerbs(request),
    ping: () => request(['ping']),
    close: () => {
      closed = true;
      child?.stdin.end();
    },
  };
}

/** The six fields of a `veth` / `veth6` request. */
const vethFields = (p: VethRequest): string[] => [
  field('netns', p.netns),
  field('hostVeth', p.hostVeth),
  field('hostMac', p.hostMac),
  field('ifName', p.ifName),
  field('podMac', p.podMac),
  field('mtu', p.mtu),
];

/** The request verbs over `request` (one line to the helper, resolved by its answer). */
function helperVerbs(request: (fields: string[]) => Promise<void>): Omit<NetlinkHelper, 'ping' | 'close'> {
  return {
    veth: async (p) => request(['veth', ...vethFields(p)]),
    veth6: async (p) => request(['veth6', ...vethFields(p), field('family', p.family)]),
    addr6: async (p) => request(['addr6', field('netns', p.netns), field('ifName', p.ifName), field('ipv6', p.ipv6)]),
    host6: async (p) =>
      request(['host6', field('hostVeth', p.hostVeth), field('ipv6', p.ipv6), field('podMac', p.podMac)]),
    route: async (p) => request(['route', field('hostVeth', p.hostVeth), field('ipv4', p.ipv4)]),
    host: async (p) =>
      request(['host', field('hostVeth', p.hostVeth), field('ipv4', p.ipv4), field('table', p.routeTableId)]),
    addr: async (p) => request(['addr', field('netns', p.netns), field('ifName', p.ifName), field('ipv4', p.ipv4)]),
    delLink: async (name, mac) => {
      try {
        await request(['dellink', field('hostVeth', name), ...(mac ? [field('hostMac', mac)] : [])]);
        return true;
      } catch (e) {
        if (e instanceof IpBatchError && (e.exitCode === ENODEV || (mac && e.exitCode === ENXIO))) return false;
        throw e;
      }
    },
    delLinks: async (a, b, macs) =>
      request([
        'dellinks',
        field('hostVeth', a),
        field('egress hostVeth', b),
        ...(macs ? [field('hostMac', macs[0]), field('egress hostMac', macs[1])] : []),
      ]),
    delRules: async (p) => {
      try {
        await request(['delrules', field('ipv4', p.ipv4), field('table', p.routeTableId)]);
        return [];
      } catch (e) {
        return [(e as Error).message];
      }
    },
  };
}
