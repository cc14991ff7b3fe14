/**
 * The supervisor of the shared test API server (apiserver-shared.ts), run as a detached
 * process: `node apiserver-main.js <state dir> <owner pid>`. Starts etcd and
 * kube-apiserver (apiserver.ts), applies the chart's ENIConfig CRD and ipamd's
 * identities (apiserver-setup.ts), writes `<state dir>/state.json` (a
 * {@link TestApiServerInfo}) or `<state dir>/error.txt`, then stays until the owner (the
 * test runner, or the one test process that started it) exits or it gets SIGTERM/SIGINT:
 * then it stops both and removes the state dir and the server's dir (after a failed start
 * too: nothing is left once the owner is gone).
 */
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startApiServer, type ApiServer, type ApiServerInfo } from '../../kit/cluster/apiserver.js';
import { adminKubectl, applyEniConfigCrd, applyIpamdIdentities } from '../../kit/cluster/apiserver-setup.js';

/** What state.json holds. */
export interface TestApiServerInfo extends ApiServerInfo {
  /** Identity (apiserver-setup.ts IPAMD_IDENTITIES) → kubeconfig with its ServiceAccount token. */
  ipamdKubeconfigs: Record<string, string>;
  /** The supervisor's pid. */
  supervisor: number;
}

/** True when `pid` is a live process. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function main(stateDir: string, owner: number): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  let server: ApiServer | undefined;
  let stopping = false;
  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(ownerGone);
    await server?.close().catch(() => undefined);
    await rm(stateDir, { recursive: true, force: true });
    process.exit(code);
  };
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGINT', () => void stop(0));
  let ownerGone: NodeJS.Timeout | undefined;
  try {
    server = await startApiServer();
    const k = await adminKubectl(server);
    await applyEniConfigCrd(k);
    const ipamdKubeconfigs = await applyIpamdIdentities(server, k);
    const { procs: _p, close: _c, ...info } = server;
    const state: TestApiServerInfo = { ...info, ipamdKubeconfigs, supervisor: process.pid };
    await writeFile(path.join(stateDir, 'state.tmp'), JSON.stringify(state));
    await rename(path.join(stateDir, 'state.tmp'), path.join(stateDir, 'state.json'));
    // Watched from here on: a start interrupted by its owner's exit still ends in this check.
    ownerGone = setInterval(() => {
      if (!alive(owner)) void stop(0);
    }, 500);
  } catch (e) {
    // Every file of this run reads the error instead of trying again; the dir goes with the owner.
    await server?.close().catch(() => undefined);
    server = undefined;
    await writeFile(path.join(stateDir, 'error.txt'), (e as Error).message);
    ownerGone ??= setInterval(() => {
      if (!alive(owner)) void stop(1);
    }, 500);
  }
}

if (process.argv[1] && process.argv[1].endsWith('apiserver-main.js')) {
  const [stateDir, owner] = process.argv.slice(2);
  if (!stateDir || !Number(owner)) {
    process.stderr.write('usage: apiserver-main.js <state dir> <owner pid>\n');
    process.exit(2);
  }
  void main(stateDir, Number(owner));
}
