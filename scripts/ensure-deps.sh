#!/usr/bin/env bash
# Installs what eni-ipam needs on a fresh Debian 12 machine with Node 20, then builds.
#   - Debian packages: iproute2 (ip), util-linux (nsenter, unshare), procps, bash, unzip, and
#     gcc + libc6-dev (the build compiles the CNI shim, cni-plugin/shim, statically);
#     with --containerd also containerd, runc, iptables and
#     containernetworking-plugins (/usr/lib/cni: loopback, ptp, host-local), kubernetes-client (kubectl),
#     prometheus (promtool: the metrics test checks a real scrape with `promtool check metrics`,
#     the rules test runs `promtool check/test rules`; the dashboard test runs the server),
#     systemd-journal-remote (a real journal for the support-bundle test);
#     with --image also mmdebstrap (the image's Debian root filesystem) and umoci (the OCI layout),
#     what `npm run image` needs (scripts/image/build.mjs), and buildah (the image test builds the
#     Dockerfile with it); with --stress also stress-ng (scripts/test-loaded.sh loads the CPUs with it);
#     with --bpf also clang, libbpf-dev and bpftool: `bash cluster/build.sh network-policy-agent`
#     compiles the network policy agent's eBPF objects from its C sources against a vmlinux.h
#     bpftool dumps from the kernel's BTF, as the agent's own Dockerfile does.
#   - npm packages from package-lock.json (npm ci) when node_modules is missing or stale.
#   - the build (tsc, the bundled CNI plugin, ipamd's one-file bundle) when sources are newer than dist/.
# Idempotent and quiet when everything is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

want_containerd=0
want_image=0
want_stress=0
want_bpf=0
for arg in "$@"; do
  case "$arg" in
    --containerd) want_containerd=1 ;;
    --image) want_image=1 ;;
    --stress) want_stress=1 ;;
    --bpf) want_bpf=1 ;;
    *) echo "eni-ipam: ensure-deps.sh: unknown option '$arg' (accepted: --containerd, --image, --stress, --bpf)" >&2; exit 2 ;;
  esac
done

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux) # the CLI test runs it as an unprivileged user
command -v pkill >/dev/null 2>&1 || need+=(procps)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# libc6-dev: headers and libc.a (the shim links statically).
# unzip: scripts/ensure-helm.sh takes helm out of an npm package's zip.
command -v unzip >/dev/null 2>&1 || need+=(unzip)
[ -f /usr/include/stdio.h ] && [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] || need+=(libc6-dev)
if [ "$want_containerd" = 1 ]; then
  command -v containerd >/dev/null 2>&1 || need+=(containerd)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  # Debian's CNI plugins (loopback, ptp, host-local...) in /usr/lib/cni, for the CRI tests.
  [ -x /usr/lib/cni/ptp ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
  # kubectl: an independent client for the Kubernetes API stand-in (sim/kube) in the tests.
  command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
  # promtool and the server (Debian's prometheus package): `promtool check metrics` on a real
  # scrape, `promtool check/test rules`, and /usr/bin/prometheus scraping ipamd in the dashboard test.
  { command -v promtool && [ -x /usr/bin/prometheus ]; } >/dev/null 2>&1 || need+=(prometheus)
  # The real cluster (cluster/, test/cluster): openssl makes its certificates, curl reads
  # ipamd's introspection inside the node, conntrack is what kube-proxy calls to flush entries.
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
  # systemd-journal-remote writes a real journal (from export format) whose kubelet and containerd
  # units the support-bundle test reads with journalctl, as on an EKS node.
  [ -x /lib/systemd/systemd-journal-remote ] || need+=(systemd-journal-remote)
fi
if [ "$want_image" = 1 ]; then
  command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
  command -v umoci >/dev/null 2>&1 || need+=(umoci)
  command -v buildah >/dev/null 2>&1 || need+=(buildah)
fi
if [ "$want_stress" = 1 ]; then
  command -v stress-ng >/dev/null 2>&1 || need+=(stress-ng)
fi
if [ "$want_bpf" = 1 ]; then
  command -v clang >/dev/null 2>&1 || need+=(clang)
  command -v bpftool >/dev/null 2>&1 || need+=(bpftool)
  [ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
fi
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "eni-ipam: need root to install: ${need[*]}" >&2; exit 1; fi
  echo "eni-ipam: installing Debian packages: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then echo "eni-ipam: Node.js >= 20 is required (found $(node --version 2>/dev/null || echo none))" >&2; exit 1; fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "eni-ipam: installing npm packages (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error >&2
fi

# helm for the chart tests (from the npm registry; node_modules/.tools/helm).
bash scripts/ensure-helm.sh

stamp=dist/.build-stamp
if [ ! -f "$stamp" ] || [ -n "$(find ipamd cni-plugin sim proto netfacts loader nodefs cli demo test bench scripts tsconfig.json package.json -newer "$stamp" -type f -print -quit 2>/dev/null)" ]; then
  echo "eni-ipam: building" >&2
  npm run --silent build >&2
  touch "$stamp"
fi
