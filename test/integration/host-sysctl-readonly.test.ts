/**
 * The host veth's IPv6 sysctls (cni-plugin/host-sysctl.ts) where /proc/sys is read-only, as
 * the chart's unprivileged ipamd container has it (found on the real IPv6 cluster: every
 * ADD failed with EROFS): written when they can be; else ADD goes on only when a pod's router
 * advertisement cannot configure the node (accept_ra 0, or 1 with forwarding 1), and fails
 * naming accept_ra and the fix otherwise. In a network namespace of the test's own.
 */
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const MOD = fileURLToPath(new URL('../../cni-plugin/host-sysctl.js', import.meta.url));
const ns = `eni-rosys-${process.pid}`;
const inNs = (...cmd: string[]): string =>
  execFileSync('ip', ['netns', 'exec', ns, ...cmd], { encoding: 'utf8' }).trim();
const conf = (veth: string, key: string): string => inNs('cat', `/proc/sys/net/ipv6/conf/${veth}/${key}`);

/** Runs applyHostVethSysctls(veth) in the namespace, /proc/sys read-only when `ro`. */
function apply(veth: string, ro: boolean): Promise<{ code: number; out: string }> {
  const js = `import(${JSON.stringify(MOD)}).then((m) => m.applyHostVethSysctls(${JSON.stringify(veth)}, {})).catch((e) => { console.error(e.message); process.exit(1); })`;
  const node = `${process.execPath} --input-type=module -e '${js}'`;
  const sh = ro ? `mount -o bind,ro /proc/sys /proc/sys && exec ${node}` : `exec ${node}`;
  return new Promise((resolve) => {
    execFile(
      'ip',
      ['netns', 'exec', ns, 'unshare', '--mount', '--propagation', 'private', 'sh', '-c', sh],
      { timeout: 20_000 },
      (err, o, e) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, out: `${o}${e}`.trim() }),
    );
  });
}

test('host veth IPv6 sysctls: written when /proc/sys is writable; read-only: checked, not failed, when RAs are ignored', async (t) => {
  execFileSync('ip', ['netns', 'add', ns]);
  t.after(() => {
    try {
      execFileSync('ip', ['netns', 'del', ns]);
    } catch {
      /* already gone */
    }
  });
  inNs(
    'sh',
    '-c',
    'echo 0 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 0 > /proc/sys/net/ipv6/conf/default/disable_ipv6',
  );
  const veth = (name: string): string => inNs('ip', 'link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`);

  veth('hv0');
  const rw = await apply('hv0', false);
  assert.equal(rw.code, 0, rw.out);
  assert.deepEqual(
    [conf('hv0', 'accept_ra'), conf('hv0', 'accept_redirects'), conf('hv0', 'forwarding')],
    ['0', '1', '0'],
  );

  // An IPv6 node: all.forwarding=1, which a new veth inherits (accept_ra 1 then ignores RAs).
  inNs('sh', '-c', 'echo 1 > /proc/sys/net/ipv6/conf/all/forwarding');
  veth('hv1');
  assert.deepEqual([conf('hv1', 'accept_ra'), conf('hv1', 'forwarding')], ['1', '1']);
  const ro = await apply('hv1', true);
  assert.equal(ro.code, 0, `read-only /proc/sys on a forwarding node must not fail ADD: ${ro.out}`);
  assert.equal(conf('hv1', 'accept_ra'), '1', 'nothing was written');

  // A node that does not forward: accept_ra 1 would take a pod's RA. Refused, naming it and the fix.
  inNs('sh', '-c', 'echo 0 > /proc/sys/net/ipv6/conf/all/forwarding');
  veth('hv2');
  const bad = await apply('hv2', true);
  assert.equal(bad.code, 1, bad.out);
  assert.match(
    bad.out,
    /cannot set \/proc\/sys\/net\/ipv6\/conf\/hv2\/accept_ra to 0: .*read-only.*accept_ra 1, forwarding 0.*net\.ipv6\.conf\.all\.forwarding=1/,
  );
});
