#!/usr/bin/env bash
# The loaded safety pass (issue #37 item 1; docs/testing.md#loaded-runs): the files that prove
# nothing is lost (restore, crash safety, custom networking, pool faults) run once more while
# stress-ng keeps the machine well past saturated: ENI_IPAM_STRESS_CPUS CPU workers (default
# 4 per core), ENI_IPAM_STRESS_IO sync workers and ENI_IPAM_STRESS_HDD disk writers (default 1
# each, in a directory of this run's own). A test that passes unloaded and fails here waited for
# a proxy (a sleep, a log line, a call count) instead of the state it asserts.
# These files run only here in `npm test` (scripts/test.sh leaves them out of the other lanes:
# `--list` prints them). Run from the repository after `npm run build`. Exits with the test
# runner's status.
set -euo pipefail
cd "$(dirname "$0")/.."
files=(
  dist/test/integration/restore-wrong-runtime.test.js
  dist/test/integration/restore-outage.test.js
  dist/test/integration/restore-kernel-evidence.test.js
  dist/test/integration/restore-races.test.js
  dist/test/integration/crash-safety.test.js
  dist/test/integration/checkpoint-crash.test.js
  dist/test/integration/custom-networking-containerd.test.js
  dist/test/integration/pool-fault-scenarios.test.js
)
if [ "${1:-}" = --list ]; then printf '%s\n' "${files[@]}"; exit 0; fi
bash scripts/ensure-deps.sh --stress >/dev/null
for f in "${files[@]}"; do [ -f "$f" ] || { echo "safety pass: $f is missing (npm run build first)" >&2; exit 2; }; done
tmp=$(mktemp -d /tmp/eni-ipam-stress-XXXXXX)
cpus=${ENI_IPAM_STRESS_CPUS:-$(( 4 * $(nproc) ))}
stress-ng --cpu "$cpus" --io "${ENI_IPAM_STRESS_IO:-1}" --hdd "${ENI_IPAM_STRESS_HDD:-1}" --hdd-bytes 256M \
  --temp-path "$tmp" --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true; rm -rf "$tmp"' EXIT
start=$(date +%s)
rc=0
node --test --test-concurrency=1 --test-timeout=600000 "${files[@]}" || rc=$?
echo "# loaded safety pass: ${#files[@]} files, $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg), stress-ng --cpu $cpus, exit $rc"
exit "$rc"
