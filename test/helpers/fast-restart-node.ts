/**
 * A preset of the kit's sim node (kit/sim-node.ts simNodeWithCloud) for the fast-restart tests (docs/how-it-works.md#restarts-that-cost-no-ec2-call): the real
 * ipamd in-process on the simulated cloud, m5.large in a /20, fast restart on, a CRI
 * stand-in kept in step with the pods. Everything is stopped after the test.
 */
import type { SimCloud, Subnet } from '../../sim/index.js';
import { simNodeWithCloud, type SimNode } from '../../kit/sim-node.js';
import { ipamdClient, type TestIpamdClient } from '../../kit/ipamd-client.js';

/** The node, its cloud and a gRPC client; `addPod` runs a pod in the CRI stand-in and ADDs it (@returns its IP). */
export interface FastRestartNode {
  sim: SimCloud;
  subnet: Subnet;
  node: SimNode;
  c: TestIpamdClient;
  addPod(id: string): Promise<string>;
}

/**
 * Builds (does not start) the node; `env` goes on top of `ENI_IPAM_FAST_RESTART=true`.
 * @param seed the simulated cloud's seed (ids differ per test file).
 */
export async function fastRestartNode(
  t: { after(fn: () => unknown): void },
  seed: number,
  env: NodeJS.ProcessEnv,
): Promise<FastRestartNode> {
  const { sim, subnetId, node } = await simNodeWithCloud({
    seed,
    subnetCidr: '10.0.0.0/20',
    instanceType: 'm5.large',
    env: { ENI_IPAM_FAST_RESTART: 'true', ...env },
  });
  const subnet = sim.state.subnets.get(subnetId)!;
  const c = ipamdClient(node.socket);
  t.after(async () => {
    c.close();
    await node.close(); // stops the cloud too
  });
  const addPod = async (id: string): Promise<string> => {
    node.cri?.add({ id, name: id, namespace: 'default', uid: `uid-${id}` });
    const r = await c.add(id);
    node.cri?.setIp(id, r.ipv4_addr);
    return r.ipv4_addr;
  };
  return { sim, subnet, node, c, addPod };
}
