#!/usr/bin/env bash
# README command two: installs what the tests need, builds, and runs every test with
# node's test runner (unit tests, then integration tests that use real network
# namespaces, gRPC over Unix sockets and the AWS SDK against the simulated cloud).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh --containerd --image --stress --bpf
# The real cluster's binaries (Kubernetes, etcd, containerd 2.x), built with Go from the module
# proxy once and cached outside the clone by go.sum (cluster/build.sh); a warm run builds nothing.
bash cluster/build.sh etcd containerd k8s >/dev/null
# Lint first (eslint with the architecture's import boundaries, prettier --check, every imported
# package declared): a lint error fails the run before any test starts.
npm run --silent lint
# What the conformance test runs (e2e.test, ginkgo, agnhost, CoreDNS: about 10 min of Go builds
# cold) and the network policy controller and agent (about 35 min cold on a loaded machine;
# test/cluster/network-policy-*.test.ts) build in the background while the lanes run (started
# after lint, so a lint failure leaves none running); each test that needs a part asks
# cluster/build.sh for it and waits on the same per-part lock.
mkdir -p build
bash cluster/build.sh e2e coredns network-policy-controller network-policy-agent >build/cluster-build-e2e.log 2>&1 &
build_e2e=$!
unset NODE_EXTRA_CA_CERTS
# Three lanes side by side (the machine has 2 cores and the suite spends much of its time
# waiting on daemons and the kernel), one file at a time in each (docs/testing.md): lane
# "cluster" runs the single-node real-cluster files (each brings up its own Kubernetes in
# network and mount namespaces of its own), then the unit, chart and CLI files, the
# integration files named in $moved below, and last the warm-pool property test
# (docs/design.md#10-the-warm-pool-at-depth; `npm run test:property` runs it alone,
# PROPERTY_SEED=<seed> reproduces a failing run); lane "node" runs every other integration
# file; lane "multi" the clusters of several nodes and the conformance set.
# The files that need a Kubernetes API share one real kube-apiserver + etcd per lane, started
# by the first of them and owned by that lane's runner (test/cluster/apiserver-shared.ts);
# once a runner is gone, apiserver-reap.js makes sure nothing of it is left, on failure or
# Ctrl-C too.
# Harnesses own everything they touch: no run may create a machine path. Those absent now must
# still be absent when the lanes end (checked below; a path another run or the machine's own
# services create fails this run too, which is what it should do on a CI machine).
machine_paths=(/etc/cni /opt/cni /run/eni-ipam /run/aws-node /run/containerd /var/lib/kubelet
  /var/log/aws-routed-eni /var/log/pods /var/log/containers /etc/kubernetes)
absent_before=()
for p in "${machine_paths[@]}"; do [ -e "$p" ] || absent_before+=("$p"); done
# The nothing-lost files run once, under load, in the loaded safety pass (lane "multi" after its
# clusters), not also unloaded in the other lanes: the loaded run asserts the same, harder.
all=$(find dist/test -name '*.test.js' | sort | grep -vxF -f <(bash scripts/test-safety-loaded.sh --list))
# Integration files that start no containerd and no Kubernetes API (the simulated cloud and ipamd
# only) run in lane "cluster" after its unit files, so the two lanes take about as long: measured
# 2026-11-28, lane "node" had 23 min of work against lane "cluster"'s 12.
moved='^dist/test/integration/(pool-|ec2-|daemon-start-failure|crash-safety|imds-stale|dashboard-prometheus)'
# Lane "multi": the files that bring up a cluster of several nodes (dist/test/cluster/multi-*,
# conformance), one at a time, beside the other two.
multi='^dist/test/cluster/(multi-|conformance)'
# The conformance file last: it needs the background e2e build.
mapfile -t multi_lane < <(grep -E "$multi" <<<"$all" | grep -v conformance; grep -E "$multi" <<<"$all" | grep conformance)
# The network policy files last in lane "cluster": they need the agent and controller the
# background build makes (about 35 min cold), so on a cold machine they find them built.
netpol='^dist/test/cluster/network-policy-'
mapfile -t cluster_lane < <(grep -E '^dist/test/cluster/' <<<"$all" | grep -vE "$multi|$netpol"; grep -E '^dist/test/(unit|chart|cli)/' <<<"$all"; grep -E "$moved" <<<"$all"; grep -E '^dist/test/property/' <<<"$all"; grep -E "$netpol" <<<"$all")
mapfile -t node_lane < <(grep -vE '^dist/test/(cluster|unit|chart|cli|property)/' <<<"$all" | grep -vE "$moved")
if [ "${#cluster_lane[@]}" -eq 0 ] || [ "${#node_lane[@]}" -eq 0 ]; then echo "no test files found under dist/test" >&2; exit 1; fi
mkdir -p build
lane_log=build/test-lane-cluster.tap
multi_log=build/test-lane-multi.tap
# Per file 30 min (lanes "cluster" and "node"): the real-cluster file took 450-560 s at load average
# 30-50 and over 600 s beside a stress pass; image.test on a clean clone (two mmdebstrap runs) over 600 s.
node --test --test-concurrency=1 --test-timeout=1800000 "${cluster_lane[@]}" >"$lane_log" 2>&1 &
lane_b=$!
# Lane "multi", then the loaded safety pass (scripts/test-safety-loaded.sh): the nothing-lost
# files again under stress-ng while the other lanes still run (a second suite at once, as on a
# shared CI machine). Its exit codes go to build/test-lane-multi.rc.
safety_log=build/test-safety-loaded.tap
rm -f build/test-lane-multi.rc
(
  rc=0
  if [ "${#multi_lane[@]}" -gt 0 ]; then
    node --test --test-concurrency=1 --test-timeout=3000000 "${multi_lane[@]}" >"$multi_log" 2>&1 || rc=$?
  fi
  rs=0; bash scripts/test-safety-loaded.sh >"$safety_log" 2>&1 || rs=$?
  echo "$rc $rs" >build/test-lane-multi.rc
) &
lane_c=$!
node_log=build/test-lane-node.tap
node --test --test-concurrency=1 --test-timeout=1800000 "${node_lane[@]}" > >(tee "$node_log") 2>&1 &
lane_a=$!
trap 'kill -TERM "$lane_a" "$lane_b" "$lane_c" "$build_e2e" 2>/dev/null || true' INT TERM
# `wait` returns early (>128) when a trapped signal arrives: wait again while the lane lives.
wait_lane() { local rc=0; wait "$1" || rc=$?; while kill -0 "$1" 2>/dev/null; do rc=0; wait "$1" || rc=$?; done; return "$rc"; }
rc_a=0; wait_lane "$lane_a" || rc_a=$?
node dist/test/cluster/apiserver-reap.js "$lane_a" || true
rc_b=0; wait_lane "$lane_b" || rc_b=$?
node dist/test/cluster/apiserver-reap.js "$lane_b" || true
wait_lane "$lane_c" || true
read -r rc_c rc_s <build/test-lane-multi.rc || { rc_c=1; rc_s=1; }
rc_e=0; wait "$build_e2e" || rc_e=$?
[ "$rc_e" -eq 0 ] || { echo "# the background e2e/CoreDNS/network policy build failed:"; tail -n 3 build/cluster-build-e2e.log; }
# Clusters and node namespaces of runners that are gone (a lane killed on its deadline).
node -e "import('./dist/kit/cluster/purge.js').then((m) => m.purgeLeftovers())" || true
echo "# ---- lane cluster (dist/test/cluster, unit, chart, cli, property) ----"
cat "$lane_log"
if [ -f "$multi_log" ]; then echo "# ---- lane multi (clusters of several nodes, conformance) ----"; cat "$multi_log"; fi
echo "# ---- loaded safety pass (scripts/test-safety-loaded.sh) ----"
cat "$safety_log" 2>/dev/null || echo "# (no output)"
echo "# lanes: node exit $rc_a, loaded safety pass exit $rc_s, cluster exit $rc_b, multi exit $rc_c"
# What failed, last, so the tail of a long run (all a CI record may keep) names it.
bash scripts/test-failures.sh "$node_log" "$lane_log" "$multi_log" "$safety_log" || true
rc_paths=0
for p in "${absent_before[@]}"; do
  if [ -e "$p" ]; then echo "# machine path $p was created during the run: a harness wrote outside what it owns" >&2; rc_paths=1; fi
done
[ "$rc_a" -eq 0 ] && [ "$rc_s" -eq 0 ] && [ "$rc_b" -eq 0 ] && [ "$rc_c" -eq 0 ] && [ "$rc_e" -eq 0 ] && [ "$rc_paths" -eq 0 ]
