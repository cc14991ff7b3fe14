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
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  EC2Client,
  ModifyNetworkInterfaceAttributeCommand,
} from '@aws-sdk/client-ec2';
import type { SimCloud } from '../../sim/index.js';
import type { Eni } from '../../sim/types.js';
import { ensureDummyAwsCredentials } from '../../kit/sim-node.js';

/** aws-node's conflist as it installs it (`10-aws.conflist`), with the stand-in as its plugin. */
export function awsConflist(): object {
  return {
    cniVersion: '0.4.0',
    name: 'aws-cni',
    disableCheck: true,
    plugins: [
      {
        name: 'aws-cni',
        type: 'aws-cni',
        vethPrefix: 'eni',
        mtu: '9001',
        podSGEnforcingMode: 'strict',
        pluginLogFile: '/var/log/aws-routed-eni/plugin.log',
        pluginLogLevel: 'DEBUG',
      },
    ],
  };
}

/** One pod the stand-in wired (a line of `adds`). */
export interface AwsWiredPod {
  containerID: string;
  ifName: string;
  ip: string;
  namespace: string;
  name: string;
  allocatedAtNs: number;
}

/** Parses the stand-in's `adds` file. */
export function parseAdds(text: string): AwsWiredPod[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [containerID, ifName, ip, namespace, name, ns] = l.split(' ');
      return {
        containerID: containerID!,
        ifName: ifName!,
        ip: ip!,
        namespace: namespace!,
        name: name!,
        allocatedAtNs: Number(ns),
      };
    });
}

/** The aws-node checkpoint (`vpc-cni-ipam/1`) of these pods, as aws-node's ipamd writes it. */
export function awsNodeCheckpoint(pods: AwsWiredPod[]): string {
  return JSON.stringify({
    version: 'vpc-cni-ipam/1',
    allocations: pods.map((p) => ({
      networkName: 'aws-cni',
      containerID: p.containerID,
      ifName: p.ifName,
      ipv4: p.ip,
      allocationTimestamp: p.allocatedAtNs,
      metadata: { k8sPodNamespace: p.namespace, k8sPodName: p.name },
    })),
  });
}

/**
 * Writes the stand-in as `<binDir>/aws-cni` (mode 0755) keeping its state in `stateDir`
 * (`pool`, `adds`, `gone`, `lock`). @returns the script path.
 */
export async function installAwsCniStandIn(binDir: string, stateDir: string): Promise<string> {
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

/** What {@link leaveEnisAsAwsNode} left on the simulated cloud. */
export interface AwsNodeEnis {
  ec2: EC2Client;
  primary: Eni;
  /** The ENI aws-node "created" (its tags, an hour old), attached at device index 1. */
  eni1: string;
  /** The secondary IPs of an ENI, in the order EC2 assigned them. */
  secondaries: (eniId: string) => string[];
}

/**
 * Leaves the simulated cloud as aws-node leaves a node, through the real AWS SDK over
 * HTTP: `perEni` secondary IPs on the primary ENI, and an ENI with aws-node's tags
 * (`node.k8s.amazonaws.com/instance_id`, `createdAt` an hour ago) and description
 * created, attached at device index 1 (delete on termination) and given `perEni` more.
 * The caller destroys the returned client (`ec2.destroy()`).
 */
export async function leaveEnisAsAwsNode(sim: SimCloud, instanceId: string, perEni: number): Promise<AwsNodeEnis> {
  ensureDummyAwsCredentials();
  const ec2 = new EC2Client({ region: 'us-west-2', endpoint: sim.ec2Endpoint, maxAttempts: 1 });
  const primary = [...sim.state.enis.values()].find(
    (e) => e.attachment?.instanceId === instanceId && e.attachment.deviceIndex === 0,
  )!;
  await ec2.send(
    new AssignPrivateIpAddressesCommand({
      NetworkInterfaceId: primary.networkInterfaceId,
      SecondaryPrivateIpAddressCount: perEni,
    }),
  );
  const created = await ec2.send(
    new CreateNetworkInterfaceCommand({
      SubnetId: primary.subnetId,
      Description: `aws-K8S-${instanceId}`,
      Groups: primary.securityGroupIds,
      TagSpecifications: [
        {
          ResourceType: 'network-interface',
          Tags: [
            { Key: 'node.k8s.amazonaws.com/instance_id', Value: instanceId },
            {
              Key: 'node.k8s.amazonaws.com/createdAt',
              Value: new Date(Date.now() - 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z'),
            },
          ],
        },
      ],
    }),
  );
  const eni1 = created.NetworkInterface!.NetworkInterfaceId!;
  const att = await ec2.send(
    new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eni1, InstanceId: instanceId, DeviceIndex: 1 }),
  );
  await ec2.send(
    new ModifyNetworkInterfaceAttributeCommand({
      NetworkInterfaceId: eni1,
      Attachment: { AttachmentId: att.AttachmentId!, DeleteOnTermination: true },
    }),
  );
  await ec2.send(
    new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni1, SecondaryPrivateIpAddressCount: perEni }),
  );
  return { ec2, primary, eni1, secondaries: (id) => sim.state.enis.get(id)!.secondaryIps };
}
