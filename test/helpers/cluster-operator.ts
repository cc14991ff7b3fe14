/**
 * What an operator looks at and does on the real test cluster, for the cluster files that
 * play an operator's case (test/cluster/operator-cases-cluster.test.ts): the node's
 * `eni-ipam.io/IPAllocatable` condition, the Node's Events, ipamd's log file on the node, a `helm upgrade` waited through to a new Ready ipamd pod, and pods
 * deleted at a steady pace while something else happens.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { waitFor } from '../../kit/wait.js';
import type { TestCluster } from '../../kit/cluster/cluster.js';
import { helmRelease, ipamdPodUids, waitEniIpamReady } from '../../kit/cluster/install.js';
import { podsOf } from '../../kit/cluster/workload.js';

/** The `eni-ipam.io/IPAllocatable` condition on the first node, or undefined. */
export async function ipAllocatable(c: TestCluster): Promise<{ reason: string; message: string } | undefined> {
  const n = await c.kubectl.json<{
    status: { conditions?: Array<{ type: string; reason: string; message: string }> };
  }>(['get', 'node', c.nodeName]);
  return n.status.conditions?.find((x) => x.type === 'eni-ipam.io/IPAllocatable');
}

/** The messages of the Events on Nodes (of `reason` when given), in every namespace. */
export async function nodeEventMessages(c: TestCluster, reason?: string): Promise<string[]> {
  const l = await c.kubectl.json<{ items: Array<{ message?: string; involvedObject: { kind: string } }> }>([
    'get',
    'events',
    '-A',
    '--field-selector',
    `involvedObject.kind=Node${reason ? `,reason=${reason}` : ''}`,
  ]);
  // Some Events carry no message (the node controller's RegisteredNode): ''.
  return l.items.filter((e) => e.involvedObject.kind === 'Node').map((e) => e.message ?? '');
}

/**
 * Every string value of every JSON line (pino) of ipamd's log file on the first node, where
 * the chart points it (`AWS_VPC_K8S_CNI_LOG_FILE`, the node's /var/log/aws-routed-eni/ipamd.log,
 * as aws-node's): what the operator reads there or in the support bundle. A line that is not
 * JSON counts as it is.
 */
export async function ipamdLogStrings(c: TestCluster): Promise<string[]> {
  const out = await readFile(c.host('/var/log/aws-routed-eni/ipamd.log'), 'utf8');
  const strings: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') strings.push(v);
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x);
  };
  for (const l of out.split('\n')) {
    try {
      walk(JSON.parse(l));
    } catch {
      if (l.trim()) strings.push(l);
    }
  }
  return strings;
}

/**
 * `helm upgrade` with `values` (and `flags`), then waits (≤ 3 min each) for a new ipamd pod
 * and for it Ready. @returns when the new pod was first seen (ms since the epoch).
 * @throws AssertionError with helm's stderr; Error naming what did not happen.
 */
export async function upgradeToNewIpamd(
  c: TestCluster,
  values: Record<string, unknown>,
  flags: string[] = [],
): Promise<number> {
  const [old] = await ipamdPodUids(c);
  const r = await helmRelease(c, 'upgrade', values, flags);
  assert.equal(r.code, 0, r.stderr);
  await waitFor(
    'a new eni-ipam pod',
    async () => {
      const uids = await ipamdPodUids(c);
      return uids.length === 1 && uids[0] !== old;
    },
    180_000,
    500,
  );
  const seen = Date.now();
  await waitEniIpamReady(c);
  return seen;
}

/**
 * Deletes one Running pod of `app` every `everyMs` (default 3000) until `stop()`, which
 * resolves with how many it deleted (their Deployment replaces them: young pods).
 */
export function churnPods(c: TestCluster, app: string, everyMs = 3000): { stop(): Promise<number> } {
  let on = true;
  let deleted = 0;
  const done = (async () => {
    while (on) {
      const p = (await podsOf(c, app)).find((x) => !x.deleting && x.phase === 'Running');
      if (p && (await c.kubectl.try(['-n', 'default', 'delete', 'pod', p.name, '--wait=false'])).code === 0) deleted++;
      await new Promise((r) => setTimeout(r, everyMs)); // the churn's pace, not a wait for a state
    }
  })();
  return {
    stop: async () => {
      on = false;
      await done;
      return deleted;
    },
  };
}
