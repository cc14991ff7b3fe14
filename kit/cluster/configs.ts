/**
 * Configuration files of the real test cluster's node: containerd 2.x (config schema
 * version 3, key names from containerd's docs/cri/config.md), the KubeletConfiguration
 * (kubelet.config.k8s.io/v1beta1) and the KubeProxyConfiguration
 * (kubeproxy.config.k8s.io/v1alpha1). What each setting is for on these machines
 * (cgroup v1, no systemd, no CAP_SYS_RESOURCE) is said beside it.
 */

const q = (s: string): string => JSON.stringify(s);

/**
 * containerd 2.x config: state and sockets under `runDir` (default `/run/containerd`, inside
 * the node's mount namespace, bound to the cluster's dir), images under `root`, CNI from
 * `/etc/cni/net.d` + `/opt/cni/bin` (the node paths the chart's hostPaths name);
 * `disable`: more plugin ids to leave out (a second containerd on the node leaves out NRI,
 * whose socket the node's own containerd serves).
 */
export function containerdConfig(o: { root: string; pauseRef: string; runDir?: string; disable?: string[] }): string {
  const run = o.runDir ?? '/run/containerd';
  const disabled = [
    'io.containerd.snapshotter.v1.btrfs',
    'io.containerd.snapshotter.v1.zfs',
    'io.containerd.snapshotter.v1.devmapper',
    'io.containerd.tracing.processor.v1.otlp',
    ...(o.disable ?? []),
  ];
  return `version = 3
root = ${q(o.root)}
state = ${q(`${run}/state`)}
disabled_plugins = ${JSON.stringify(disabled)}
[grpc]
  address = ${q(`${run}/containerd.sock`)}
[ttrpc]
  address = ${q(`${run}/containerd.sock.ttrpc`)}
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${q(o.pauseRef)}
[plugins.'io.containerd.cri.v1.runtime']
  # root lacks CAP_SYS_RESOURCE here: without this every RunPodSandbox fails in runc.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/opt/cni/bin"]
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`;
}

/**
 * KubeletConfiguration for a cgroup-v1 machine without systemd; `address`: where the kubelet
 * serves (an IP or `::`); `clusterDns`: the cluster DNS Service IP(s) pods resolve through
 * (kit/cluster/coredns.ts serves them), in the domain `cluster.local`.
 */
export function kubeletConfig(o: {
  address: string;
  cgroupRoot: string;
  maxPods: number;
  clusterDns: string[];
}): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# No systemd here; kubelet 1.35+ refuses cgroup v1 unless told otherwise (KEP-5573).
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupRoot: ${q(o.cgroupRoot)}
cgroupsPerQOS: true
# The default -999 needs CAP_SYS_RESOURCE.
oomScoreAdj: 0
protectKernelDefaults: false
makeIPTablesUtilChains: true
# Do not evict for the shared host disk; never collect the imported images (nothing to pull them from).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { imagefs.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%" }
authentication: { anonymous: { enabled: true }, webhook: { enabled: false } }
authorization: { mode: AlwaysAllow }
address: ${q(o.address)}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
registerNode: true
serializeImagePulls: false
maxPods: ${o.maxPods}
clusterDNS: ${JSON.stringify(o.clusterDns)}
clusterDomain: cluster.local
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 10s
shutdownGracePeriod: 0s
`;
}

/**
 * KubeProxyConfiguration, iptables mode, setting no global conntrack sysctl. `bindAddress`
 * a wildcard (`0.0.0.0` or `::`): kube-proxy then takes its families from the Node's addresses.
 */
export function kubeProxyConfig(o: { kubeconfig: string; nodeName: string; bindAddress: string }): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: ${q(o.kubeconfig)} }
hostnameOverride: ${q(o.nodeName)}
mode: iptables
bindAddress: ${q(o.bindAddress)}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
`;
}
