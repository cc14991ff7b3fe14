#!/usr/bin/env bash
# Builds the real Kubernetes parts the cluster tests run, with `go build` from the Go module
# proxy: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and
# kubectl (k8s.io/kubernetes v1.36.3), etcd (go.etcd.io/etcd/server/v3 v3.6.16), and
# containerd 2.x with containerd-shim-runc-v2 and ctr. Each comes from a wrapper module in
# cluster/go/<name> (only its go.mod and go.sum are committed). Also `e2e`, Kubernetes' e2e
# suite (e2e.test from `go test -c k8s.io/kubernetes/test/e2e`, the ginkgo CLI and agnhost),
# and `coredns` (CoreDNS v1.14.2, the version kubeadm v1.36 installs), for `npm run
# conformance` and test/cluster/conformance.test.ts.
#
# Binaries are cached outside the clone, keyed by the wrapper's go.mod + go.sum:
#   ${ENI_IPAM_CLUSTER_CACHE:-/var/cache/eni-ipam/cluster}/<name>-<sha256[:16]>/
# so a warm run builds nothing. Prints the bin directory of each on stdout as NAME=DIR lines
# (eval-able). Any failure: one line naming what failed, exit 1.
#
# Also, only when named: `network-policy-agent` (aws-network-policy-agent v1.4.1, the node agent
# amazon-vpc-cni-k8s v1.23.0 ships, with its CLIs and its six eBPF objects compiled by clang from
# the C sources in its module, against a vmlinux.h bpftool dumps from this kernel's BTF, as its
# Dockerfile does) and `network-policy-controller` (amazon-network-policy-controller-k8s v1.1.10,
# which turns NetworkPolicies into PolicyEndpoints; EKS runs it in its control plane).
#
# Usage: bash cluster/build.sh [k8s|etcd|containerd|e2e|coredns|cni-metrics-helper|crictl|
#                               network-policy-agent|network-policy-controller ...]
# (default: the first five; cni-metrics-helper, amazon-vpc-cni-k8s's metrics aggregator, and
# crictl, the CRI client for looking into a node by hand, only when named)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${ENI_IPAM_CLUSTER_CACHE:-/var/cache/eni-ipam/cluster}
k8s_version=v1.36.3
containerd_version=v2.4.2
npa_version=v1.4.1
npc_version=v1.1.10

fail() { echo "eni-ipam cluster build: $*" >&2; exit 1; }
command -v go >/dev/null 2>&1 || fail "go is not on PATH (this needs Go >= 1.26 and the Go module proxy)"

key() { cat "$here/go/$1/go.mod" "$here/go/$1/go.sum" | sha256sum | cut -c1-16; }

# Downloads the modules the wrapper's tools need (not `all`: that adds test-only modules),
# plus the test dependencies of any package given after the name (e2e: test/e2e);
# a proxy that drops a connection is asked again (3 attempts, 5 s then 10 s apart; what was
# fetched stays in the module cache); a module that still cannot be fetched fails with one
# line naming it.
download() {
  local name=$1 log attempt what
  shift
  log=$(mktemp)
  for attempt in 1 2 3; do
    if (cd "$here/go/$name" && go list -deps tool && { [ $# -eq 0 ] || go list -deps -test "$@"; }) >"$log" 2>&1; then rm -f "$log"; return; fi
    # The first line saying why ("go: downloading …" lines are progress, not a cause).
    what=$(grep -v '^go: downloading ' "$log" | grep -m1 -E '(^go: |: reading |unknown revision|not found|verifying )' ||
      grep -v '^go: downloading ' "$log" | tail -n1 || true)
    # Asking again cannot fix a module, version or checksum that does not exist (the proxy's 404/410).
    if grep -q -E 'unknown revision|invalid version|checksum mismatch|SECURITY ERROR|: 404 Not Found|: 410 Gone' "$log"; then break; fi
    if [ "$attempt" -lt 3 ]; then
      echo "eni-ipam cluster build: fetching the Go modules of $name failed (attempt $attempt of 3): $what; trying again" >&2
      sleep $((attempt * 5))
    fi
  done
  rm -f "$log"
  fail "cannot fetch a Go module for $name: $what"
}

# clang (the BPF target), libbpf's headers and bpftool (vmlinux.h from the kernel's BTF):
# Debian's clang, libbpf-dev and bpftool (scripts/ensure-deps.sh --bpf).
bpf_tools_present() {
  local t
  for t in clang bpftool; do
    command -v "$t" >/dev/null 2>&1 || fail "$t is not on PATH (run: bash scripts/ensure-deps.sh --bpf)"
  done
  [ -f /usr/include/bpf/bpf_helpers.h ] || fail "libbpf's headers are missing (run: bash scripts/ensure-deps.sh --bpf)"
  [ -r /sys/kernel/btf/vmlinux ] || fail "/sys/kernel/btf/vmlinux is not readable: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF)"
}

# aws-network-policy-agent as its Makefile's build-linux and build-bpf targets build it: the
# agent with cgo and its flags (tags netgo,ebpf,core, -buildmode=pie, -extldflags -static: with
# PIE that links a binary needing only libc.so.6, as upstream's on its glibc base image), the
# two CLIs, and the six eBPF objects
# (clang -target bpf, CO-RE) from pkg/ebpf/c of the module, in a scratch copy (the module
# cache is read-only). The agent copies the objects and the CLI from its working directory
# to /host/opt/cni/bin at start, so they sit beside it. Args: bin dir, log file.
build_network_policy_agent() {
  local bin=$1 log=$2 src c vp=github.com/aws/aws-network-policy-agent/pkg/version sdk
  (
    cd "$here/go/network-policy-agent"
    sdk=$(go list -m -f '{{.Version}}' github.com/aws/aws-ebpf-sdk-go)
    local ld="-s -w -X $vp.GitVersion=$npa_version -X $vp.BuildDate=2026-01-01T00:00:00Z -X $vp.EbpfSDKVersion=$sdk"
    CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags netgo,ebpf,core \
      -ldflags "$ld -extldflags -static" -o "$bin/aws-network-policy-agent" github.com/aws/aws-network-policy-agent &&
      go build -trimpath -buildmode=pie -ldflags "$ld" -o "$bin/aws-eks-na-cli" github.com/aws/aws-network-policy-agent/cmd/cli &&
      go build -trimpath -buildmode=pie -ldflags "$ld" -o "$bin/aws-eks-na-cli-v6" github.com/aws/aws-network-policy-agent/cmd/cliv6
  ) >"$log" 2>&1 || fail "go build of the network policy agent failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
  src=$(cd "$here/go/network-policy-agent" && go list -m -f '{{.Dir}}' github.com/aws/aws-network-policy-agent)
  c=$(dirname "$bin")/bpf-src
  mkdir -p "$c" && cp "$src"/pkg/ebpf/c/*.c "$src"/pkg/ebpf/c/*.h "$c/" && chmod -R u+w "$c"
  bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$c/vmlinux.h" 2>>"$log" ||
    fail "bpftool could not dump /sys/kernel/btf/vmlinux (log: $log)"
  local arch
  arch=$(go env GOARCH | sed 's/amd64/x86/; s/arm64/arm64/')
  for obj in tc.v4ingress tc.v4egress tc.v6ingress tc.v6egress v4events v6events; do
    clang -I"$c" -g -O2 -Wall -fpie -target bpf -DCORE -D__BPF_TRACING__ -march=bpf "-D__TARGET_ARCH_$arch" \
      -c "$c/$obj.bpf.c" -o "$bin/$obj.bpf.o" >>"$log" 2>&1 ||
      fail "clang could not compile $obj.bpf.c of the network policy agent: $(grep -m1 'error' "$log" || true) (log: $log)"
  done
}

build_one() {
  local name=$1 dir out log
  dir="$cache/$name-$(key "$name")"
  out="$dir/bin"
  if [ -f "$dir/.complete" ]; then echo "${name//-/_}_bin=$out"; return; fi
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin"
  echo "eni-ipam cluster build: building $name into $dir (cold; later runs reuse it)" >&2
  if [ "$name" = e2e ]; then download "$name" k8s.io/kubernetes/test/e2e; else download "$name"; fi
  [ "$name" != network-policy-agent ] || bpf_tools_present
  log="$dir.tmp/build.log"
  local start=$SECONDS
  # The version ldflags: without them every binary says v0.0.0-master and Helm's
  # kubeVersion checks fail (k8s.io/component-base/version, hack/lib/version.sh).
  local ld="-s -w" kv
  for kv in gitVersion=$k8s_version gitMajor=1 gitMinor=36 gitTreeState=clean buildDate=2026-01-01T00:00:00Z; do
    ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  case "$name" in
    k8s)
      (cd "$here/go/k8s" && CGO_ENABLED=0 GOGC=200 go build -trimpath -tags selinux,notest,grpcnotrace \
        -ldflags "all=$ld" -o "$dir.tmp/bin/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
        k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl) >"$log" 2>&1 ||
        fail "go build of Kubernetes failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    etcd)
      (cd "$here/go/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.tmp/bin/etcd" \
        go.etcd.io/etcd/server/v3) >"$log" 2>&1 ||
        fail "go build of etcd failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    containerd)
      (cd "$here/go/containerd" && CGO_ENABLED=1 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
        -o "$dir.tmp/bin/" github.com/containerd/containerd/v2/cmd/containerd \
        github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
        github.com/containerd/containerd/v2/cmd/ctr) >"$log" 2>&1 ||
        fail "go build of containerd failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    e2e)
      # e2e.test as test/e2e/README.md builds it (`go test -c`), with the release's version;
      # ginkgo and agnhost at the versions k8s.io/kubernetes pins.
      (cd "$here/go/e2e" && CGO_ENABLED=0 GOGC=200 go test -c -trimpath -ldflags "all=$ld" \
        -o "$dir.tmp/bin/e2e.test" k8s.io/kubernetes/test/e2e &&
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.tmp/bin/" \
          github.com/onsi/ginkgo/v2/ginkgo k8s.io/kubernetes/test/images/agnhost) >"$log" 2>&1 ||
        fail "go build of the e2e suite failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    coredns)
      (cd "$here/go/coredns" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.tmp/bin/coredns" \
        github.com/coredns/coredns) >"$log" 2>&1 ||
        fail "go build of CoreDNS failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    cni-metrics-helper)
      # Not a cluster part: amazon-vpc-cni-k8s's own metrics aggregator, built only when asked
      # (test/cluster/cni-metrics-helper.test.ts, through kit/cluster/binaries.ts).
      (cd "$here/go/cni-metrics-helper" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "$dir.tmp/bin/cni-metrics-helper" github.com/aws/amazon-vpc-cni-k8s/cmd/cni-metrics-helper) >"$log" 2>&1 ||
        fail "go build of cni-metrics-helper failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    crictl)
      # Not a cluster part: the CRI client for people looking into a node (docs/real-cluster.md).
      (cd "$here/go/crictl" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
        -o "$dir.tmp/bin/crictl" sigs.k8s.io/cri-tools/cmd/crictl) >"$log" 2>&1 ||
        fail "go build of crictl failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    network-policy-agent)
      build_network_policy_agent "$dir.tmp/bin" "$log"
      ;;
    network-policy-controller)
      # As the upstream .ko.yaml builds it: no cgo, the version in pkg/version.
      local vp=github.com/aws/amazon-network-policy-controller-k8s/pkg/version
      (cd "$here/go/network-policy-controller" && CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X $vp.GitVersion=$npc_version -X $vp.BuildDate=2026-01-01T00:00:00Z" \
        -o "$dir.tmp/bin/network-policy-controller" github.com/aws/amazon-network-policy-controller-k8s/cmd) >"$log" 2>&1 ||
        fail "go build of the network policy controller failed: $(grep -m1 -v '^#' "$log" || true) (log: $log)"
      ;;
    *) fail "unknown part '$name' (accepted: k8s, etcd, containerd, e2e, coredns, cni-metrics-helper, crictl, network-policy-agent, network-policy-controller)" ;;
  esac
  echo "built in $((SECONDS - start)) s" >>"$log"
  echo "eni-ipam cluster build: $name built in $((SECONDS - start)) s" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir" && touch "$dir/.complete"
  echo "${name//-/_}_bin=$dir/bin"
}

parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(etcd containerd k8s e2e coredns)
mkdir -p "$cache"
# One build of a part at a time, across processes (scripts/test.sh builds e2e in the background
# while the conformance test may ask for it): a second caller waits, then finds it complete.
for p in "${parts[@]}"; do
  exec {lock}>"$cache/.$p.lock"
  flock "$lock"
  build_one "$p"
  exec {lock}>&-
done
