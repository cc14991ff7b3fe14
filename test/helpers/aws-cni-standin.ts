/**
 * A stand-in for amazon-vpc-cni-k8s's `aws-cni` plugin on a test node, so a migration
 * test starts from pods wired the way aws-node wires them (facts from its
 * `cmd/routed-eni-cni-plugin` and `pkg/networkutils`): host veth
 * `eni` + the first 11 hex digits of sha1("<namespace>.<name>"), the pod's `<ip>/32` on
 * its eth0 with the link-local gateway 169.254.1.1 (scope link route, default route,
 * permanent neighbour to the host veth's MAC), the host route `<ip>/32 dev <veth>`
 * scope link, and the ip rules `to <ip> lookup main` (prio 512) and, for an IP of a
 * secondary ENI, `from <ip> lookup <device number + 1>` (prio 1536).
 *
 * It is a bash script containerd execs (the bin dir entry `aws-cni`), its IPs coming
 * from a pool file the test fills (one `<ip> <table>` line each, `main` for the primary
 * ENI); every ADD appends `<containerID> <ifName> <ip> <namespace> <name> <ns since epoch>`
 * to `adds`, from which the test writes the aws-node checkpoint as aws-node's ipamd
 * would. Once the file `gone` exists (aws-node was removed from the node), ADD fails with
 * CNI code 11, as aws-cni does when its ipamd does not answer. DEL removes what ADD made.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

/** aws-node's conflist as it installs it (`10-aws.conflist`), with the stand-in as its plugin. */
export function awsConflist(): object {
  return { cniVersion: '0.4.0', name: 'aws-cni', disableCheck: true, plugins: [{ name: 'aws-cni', type: 'aws-cni', vethPrefix: 'eni', mtu: '9001', podSGEnforcingMode: 'strict', pluginLogFile: '/var/log/aws-routed-eni/plugin.log', pluginLogLevel: 'DEBUG' }] };
}

/** One pod the stand-in wired (a line of `adds`). */
export interface AwsWiredPod { containerID: string; ifName: string; ip: string; namespace: string; name: string; allocatedAtNs: number }

/** Parses the stand-in's `adds` file. */
export function parseAdds(text: string): AwsWiredPod[] {
  return text.trim().split('\n').filter(Boolean).map((l) => {
    const [containerID, ifName, ip, namespace, name, ns] = l.split(' ');
    return { containerID: containerID!, ifName: ifName!, ip: ip!, namespace: namespace!, name: name!, allocatedAtNs: Number(ns) };
  });
}

/** The aws-node checkpoint (`vpc-cni-ipam/1`) of these pods, as aws-node's ipamd writes it. */
export function awsNodeCheckpoint(pods: AwsWiredPod[]): string {
  return JSON.stringify({
    version: 'vpc-cni-ipam/1',
    allocations: pods.map((p) => ({
      networkName: 'aws-cni', containerID: p.containerID, ifName: p.ifName, ipv4: p.ip, allocationTimestamp: p.allocatedAtNs,
      metadata: { k8sPodNamespace: p.namespace, k8sPodName: p.name },
    })),
  });
}

/**
 * Writes the stand-in as `<binDir>/aws-cni` (mode 0755) keeping its state in `stateDir`
 * (`pool`, `adds`, `gone`, `lock`). @returns the script path.
 */
export async function installAwsCniStandin(binDir: string, stateDir: string): Promise<string> {
  const file = path.join(binDir, 'aws-cni');
  const q = JSON.stringify(stateDir);
  const script = `#!/bin/bash
# aws-cni stand-in for tests (see test/helpers/aws-cni-standin.ts)
set -euo pipefail
STATE=${q}
exec 9>>"$STATE/lock"; flock 9
exec 2>>"$STATE/stderr"
conf=$(cat)
ver=$(printf '%s' "$conf" | sed -n 's/.*"cniVersion" *: *"\\([^"]*\\)".*/\\1/p' | head -1)
arg() { printf '%s' "\${CNI_ARGS:-}" | tr ';' '\\n' | sed -n "s/^$1=//p"; }
ns=$(arg K8S_POD_NAMESPACE); name=$(arg K8S_POD_NAME)
veth=eni$(printf '%s.%s' "$ns" "$name" | sha1sum | cut -c1-11)
fail() { printf '{"cniVersion":"%s","code":%s,"msg":"%s"}\\n' "$ver" "$1" "$2"; exit 1; }
case "$CNI_COMMAND" in
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
ADD)
  [ -e "$STATE/gone" ] && fail 11 "aws-node ipamd is not running"
  line=$(head -n1 "$STATE/pool"); [ -n "$line" ] || fail 11 "no IP left in the pool"
  sed -i 1d "$STATE/pool"
  trap 'ip link del "$veth" 2>/dev/null; printf "%s\\n" "$line" >> "$STATE/pool"' ERR
  ip=\${line% *}; table=\${line#* }
  tmp=tmp$$
  ip link add "$veth" type veth peer name "$tmp"
  ip link set "$tmp" netns "$(basename "$CNI_NETNS")"
  mac=$(ip -o link show dev "$veth" | sed -n 's|.*link/ether \\([0-9a-f:]*\\).*|\\1|p')
  nsenter --net="$CNI_NETNS" sh -ec "ip link set $tmp name $CNI_IFNAME; ip link set $CNI_IFNAME up; ip addr add $ip/32 dev $CNI_IFNAME; ip route add 169.254.1.1 dev $CNI_IFNAME scope link; ip route add default via 169.254.1.1 dev $CNI_IFNAME; ip neigh add 169.254.1.1 dev $CNI_IFNAME lladdr $mac nud permanent"
  ip link set "$veth" up
  ip route add "$ip/32" dev "$veth" scope link
  ip rule add to "$ip" lookup main prio 512
  [ "$table" = main ] || ip rule add from "$ip" lookup "$table" prio 1536
  echo "$CNI_CONTAINERID $CNI_IFNAME $ip $ns $name $(date +%s%N)" >> "$STATE/adds"
  printf '{"cniVersion":"%s","interfaces":[{"name":"%s"},{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","address":"%s/32","interface":1}],"dns":{}}\\n' "$ver" "$veth" "$CNI_IFNAME" "$CNI_NETNS" "$ip"
  ;;
DEL)
  ip link del "$veth" 2>/dev/null || true
  ;;
CHECK) ;;
*) fail 4 "unknown CNI_COMMAND $CNI_COMMAND" ;;
esac
`;
  await writeFile(file, script, { mode: 0o755 });
  return file;
}
