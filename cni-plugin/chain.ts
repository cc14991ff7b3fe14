/**
 * ADD inside a conflist (CNI spec, "Network configuration lists"): a plugin handed a
 * `prevResult` must pass it on, modify it or suppress it, never ignore it. This plugin
 * appends its own interfaces, IPs and routes to the previous result (its IP entries'
 * `interface` indexes shifted past the previous interfaces) and keeps the previous DNS.
 * Both results are in the config's `cniVersion` (the runtime guarantees it).
 */
import type { AddResult } from './result.js';

type Obj = Record<string, unknown>;
const list = (v: unknown): Obj[] =>
  Array.isArray(v) ? v.filter((x): x is Obj => typeof x === 'object' && x !== null) : [];

/**
 * Merges this plugin's ADD `result` after `prev`. Returns `result` unchanged when there is
 * no previous result. A route already in `prev` (same JSON) is not repeated.
 */
export function chainAddResult(result: AddResult, prev: Obj | undefined): AddResult | Obj {
  if (!prev) return result;
  const prevIfs = list(prev.interfaces);
  const routes = [...list(prev.routes)];
  const seen = new Set(routes.map((r) => JSON.stringify(r)));
  for (const r of result.routes) if (!seen.has(JSON.stringify(r))) routes.push(r);
  const dns = typeof prev.dns === 'object' && prev.dns !== null ? prev.dns : result.dns;
  return {
    ...prev,
    cniVersion: result.cniVersion,
    interfaces: [...prevIfs, ...result.interfaces],
    ips: [...list(prev.ips), ...result.ips.map((ip) => ({ ...ip, interface: ip.interface + prevIfs.length }))],
    routes,
    dns,
  };
}
