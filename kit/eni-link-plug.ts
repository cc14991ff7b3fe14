/**
 * Plays the hypervisor for ipamd's host networking in a test node namespace: for every
 * ENI the simulated EC2 reports attached to the instance, a link with the ENI's MAC
 * appears in the node namespace as `eth<device index>` (ipamd finds ENI links by the
 * MAC IMDS gives, docs/design.md#7-host-networking). The links are veth pairs whose other end goes to a
 * "vpc" namespace the caller created (dummy links are not available on this kernel);
 * nothing is created in the test's own namespace. A link is removed when its ENI is
 * detached. Names stay ≤ 15 bytes: `eth<d>` / `vpc<d>`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Netns } from './netns.js';
import type { SimCloud } from '../sim/index.js';

const run = promisify(execFile);

/** A running plug loop. */
export interface EniLinkPlug {
  /** ENI id → link name in the node namespace, for the links that exist now. */
  links: Map<string, string>;
  /** Runs one pass now (attach/detach changes since the last pass). */
  sync(): Promise<void>;
  /** Stops the loop (the links stay until their namespaces go). */
  stop(): Promise<void>;
}

/**
 * Plugs the links of the ENIs attached now, then follows attach/detach every `intervalMs`.
 * @throws Error (from `ip`) when a link cannot be created in the first pass.
 */
export async function plugEniLinks(o: {
  sim: SimCloud;
  instanceId: string;
  node: Netns;
  vpc: Netns;
  intervalMs?: number;
}): Promise<EniLinkPlug> {
  const ip = (...args: string[]) => run('ip', ['-n', o.node.name, ...args]);
  const links = new Map<string, string>();
  const pass = async (): Promise<void> => {
    const attached = new Map<string, { mac: string; device: number }>();
    for (const e of o.sim.state.enis.values()) {
      if (e.attachment?.instanceId === o.instanceId && e.attachment.status === 'attached')
        attached.set(e.networkInterfaceId, { mac: e.macAddress, device: e.attachment.deviceIndex });
    }
    for (const [id, e] of attached) {
      if (links.has(id)) continue;
      const name = `eth${e.device}`;
      await ip(
        'link',
        'add',
        name,
        'address',
        e.mac,
        'type',
        'veth',
        'peer',
        'name',
        `vpc${e.device}`,
        'netns',
        o.vpc.name,
      );
      await run('ip', ['-n', o.vpc.name, 'link', 'set', `vpc${e.device}`, 'up']);
      links.set(id, name);
    }
    for (const [id, name] of links) {
      if (attached.has(id)) continue;
      await ip('link', 'del', name).catch(() => undefined);
      links.delete(id);
    }
  };
  let running: Promise<void> | undefined;
  const sync = (): Promise<void> =>
    (running ??= pass().finally(() => {
      running = undefined;
    }));
  await sync();
  const timer = setInterval(() => void sync().catch(() => undefined), o.intervalMs ?? 100);
  return {
    links,
    sync,
    async stop() {
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
}
