#!/usr/bin/env bash
# README command two: installs what the tests need, builds, and runs every test with
# node's test runner (unit tests, then integration tests that use real network
# namespaces, gRPC over Unix sockets and the AWS SDK against the simulated cloud).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh --containerd
unset NODE_EXTRA_CA_CERTS
mapfile -t files < <(find dist/test -name '*.test.js' | sort)
if [ "${#files[@]}" -eq 0 ]; then echo "no test files found under dist/test" >&2; exit 1; fi
# One file at a time: integration tests create namespaces and daemons of their own.
exec node --test --test-concurrency=1 --test-timeout=600000 "${files[@]}"
