/**
 * One test's corner of the run's real API server (test/cluster/apiserver-shared.ts): a
 * Node of its own (a unique name, so `spec.nodeName` and `metadata.name` selectors keep
 * tests apart), an admin scene setter whose objects are deleted after the test, and
 * ipamd's kubeconfigs (the chart's ServiceAccount tokens: RBAC as the chart grants it),
 * optionally through a {@link FaultRelay} for network faults.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testApiServer, type TestApiServerInfo } from '../cluster/apiserver-shared.js';
import { realKube, uniqueName, type RealKube } from '../../kit/cluster/apiserver-objects.js';
import { startFaultRelay, type FaultRelay } from './tcp-fault-relay.js';

/** What {@link realKubeEnv} made. */
export interface RealKubeEnv {
  server: TestApiServerInfo;
  /** Admin scene setter (objects deleted after the test). */
  kube: RealKube;
  /** This test's Node. */
  nodeName: string;
  /** A temp dir of this test (removed after it). */
  dir: string;
  /** ipamd's kubeconfig for `identity` (default `ipamd`: the chart's defaults; see apiserver-setup.ts). */
  kubeconfig(identity?: string): string;
  /** A relay to the server and a kubeconfig (`identity`) that goes through it. */
  viaRelay(identity?: string): Promise<{ relay: FaultRelay; kubeconfig: string }>;
}

/**
 * Registers a Node `<prefix>-<pid>-<n>` (with `labels`, `annotations`, `runtimeVersion`) on
 * the run's API server, started on first use. Everything is removed after the test.
 * @throws Error when the server cannot start or the Node cannot be created.
 */
export async function realKubeEnv(
  t: { after(fn: () => Promise<void> | void): void },
  o: {
    prefix?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    runtimeVersion?: string;
  } = {},
): Promise<RealKubeEnv> {
  const server = await testApiServer();
  const dir = await mkdtemp(join(tmpdir(), 'eni-ipam-realkube-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kube = realKube(server);
  t.after(() => kube.cleanup());
  const nodeName = uniqueName(o.prefix ?? 'node');
  await kube.registerNode(nodeName, o);
  const kubeconfig = (identity = 'ipamd'): string => {
    const k = server.ipamdKubeconfigs[identity];
    if (!k) throw new Error(`no ipamd identity ${identity} on the test API server`);
    return k;
  };
  return {
    server,
    kube,
    nodeName,
    dir,
    kubeconfig,
    async viaRelay(identity) {
      const u = new URL(server.url);
      const relay = await startFaultRelay({ host: u.hostname, port: Number(u.port) });
      t.after(() => relay.close());
      const text = (await readFile(kubeconfig(identity), 'utf8')).replace(
        JSON.stringify(server.url),
        JSON.stringify(`https://127.0.0.1:${relay.port}`),
      );
      const path = join(dir, `${identity ?? 'ipamd'}-relay-${relay.port}.kubeconfig`);
      await writeFile(path, text, { mode: 0o600 });
      return { relay, kubeconfig: path };
    },
  };
}
