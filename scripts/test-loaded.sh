#!/usr/bin/env bash
# `npm test` on a loaded machine, the way CI's shared 2-core runners are: stress-ng keeps
# ENI_IPAM_STRESS_CPUS (default 2) CPU workers busy for the whole run, then is stopped.
# A test that passes here does not depend on timing; one that fails waited for a proxy
# (a sleep, a log line, a call count) instead of the state it asserts.
# Arguments are passed to scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh --stress
stress-ng --cpu "${ENI_IPAM_STRESS_CPUS:-2}" --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
bash scripts/test.sh "$@"
