/**
 * Helpers of the unknown-outcome scenarios (docs/design.md#10-the-warm-pool-at-depth item 5): inject a failure on one
 * mutating EC2 action that the simulated cloud either performs first (the client cannot
 * know it happened) or does not, ADD with a check that the IP handed out is on EC2 at
 * that moment, and wait for ipamd to converge on what EC2 shows.
 */
import assert from 'node:assert/strict';
import { NO_RESPONSE } from '../../sim/index.js';
import { ageEnis, leakedEnis, type LifecycleNode } from './lifecycle-node.js';
import { eniPodAddresses } from '../../kit/nothing-lost.js';
import { waitFor } from '../../kit/wait.js';

/**
 * How an injected failure behaves:
 * - `applied-5xx`: EC2 performs the action, then answers 500 InternalError;
 * - `not-applied-5xx`: EC2 answers 500 InternalError and does nothing;
 * - `applied-timeout`: EC2 performs the action and never answers (the client times out).
 */
export type UnknownOutcome = 'applied-5xx' | 'not-applied-5xx' | 'applied-timeout';

/** Every outcome of {@link UnknownOutcome}. */
export const OUTCOMES: readonly UnknownOutcome[] = ['applied-5xx', 'not-applied-5xx', 'applied-timeout'];

/** Env for these scenarios: a short EC2 attempt timeout, so `applied-timeout` costs 1 s. */
export const UNKNOWN_OUTCOME_ENV: NodeJS.ProcessEnv = { ENI_IPAM_EC2_TIMEOUT: '1s', ENI_IPAM_ADD_WAIT_TIMEOUT: '15s' };

/** Makes the next call of `action` fail as `outcome` says. */
export function injectUnknown(n: LifecycleNode, action: string, outcome: UnknownOutcome): void {
  n.h.sim.faults.injectError({
    action,
    count: 1,
    code: outcome === 'applied-timeout' ? NO_RESPONSE : 'InternalError',
    when: outcome === 'not-applied-5xx' ? 'before' : 'after',
  });
}

/**
 * Waits until the injected failure was drawn by a call (and that call ended). The bound is
 * generous (60 s): reaching the call takes cooldown, shrink delay and an ENI free, which a
 * loaded 2-core CI machine has stretched past 20 s.
 */
export async function waitFaultDrawn(n: LifecycleNode, action: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    `the injected ${action} failure drawn`,
    () =>
      n.h.sim.faults.pendingInjectedErrors() === 0 &&
      n.h.sim.calls.some((c) => c.action === action && !c.ok && c.durationMs !== undefined),
    timeoutMs,
    20,
  );
}

/** Addresses (secondary IPs and /28 prefix addresses) EC2 shows on ENIs attached to the node, by ENI. */
export function ec2Addresses(n: LifecycleNode): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const e of n.h.sim.state.enis.values()) {
    if (e.attachment?.instanceId === n.h.instanceId && e.attachment.status === 'attached')
      out.set(e.networkInterfaceId, eniPodAddresses(e));
  }
  return out;
}

/** ADD through ipamd; asserts the IP it got is on an ENI attached to the node in EC2 right now. */
export async function addOnEc2(n: LifecycleNode, id: string): Promise<string> {
  const ip = (await n.add(id)).ipv4_addr;
  const on = [...ec2Addresses(n)].find(([, ips]) => ips.includes(ip));
  assert.ok(on, `ADD ${id} got ${ip}, which EC2 shows on no ENI attached to the node`);
  return ip;
}

/** Why ipamd's per-ENI address counts differ from EC2's (undefined when they agree and nothing is in flight). */
export async function divergence(n: LifecycleNode): Promise<string | undefined> {
  const s = await n.status();
  if (s.counts.releasing) return `${s.counts.releasing} addresses still releasing`;
  if (s.eniLifecycle.pendingEnis.length || s.eniLifecycle.orphanEnis.length)
    return `pending ${s.eniLifecycle.pendingEnis}, orphans ${s.eniLifecycle.orphanEnis}`;
  const ec2 = ec2Addresses(n);
  const ds = new Map<string, number>(
    (s.enis as Array<{ eniId: string; total: number }>).map((v) => [v.eniId, v.total]),
  );
  for (const [id, ips] of ec2)
    if (ds.get(id) !== ips.length) return `${id}: EC2 shows ${ips.length} addresses, ipamd ${ds.get(id) ?? 'no ENI'}`;
  for (const id of ds.keys()) if (!ec2.has(id)) return `ipamd serves from ${id}, which is not attached in EC2`;
  return undefined;
}

/**
 * Waits until ipamd agrees with EC2 ({@link divergence}) and no ENI of ours is left
 * `available`: leaked ones are aged past 5 minutes (their createdAt tag) so the sweep
 * may delete them. @returns the leaked ENIs that had to be swept.
 */
export async function waitConverged(n: LifecycleNode, timeoutMs = 30_000): Promise<string[]> {
  const swept = new Set<string>();
  let why: string | undefined = 'not checked yet';
  try {
    await waitFor(
      'ipamd converged on EC2',
      async () => {
        const leaks = leakedEnis(n)
          .map((e) => e.networkInterfaceId)
          .filter((id) => !swept.has(id));
        if (leaks.length) {
          await ageEnis(n, leaks);
          for (const id of leaks) swept.add(id);
        }
        why = leakedEnis(n).length
          ? `leaked ENIs ${leakedEnis(n).map((e) => e.networkInterfaceId)}`
          : await divergence(n);
        return why === undefined;
      },
      timeoutMs,
      200,
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}: ${why}`);
  }
  return [...swept];
}
