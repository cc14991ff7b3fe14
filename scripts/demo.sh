#!/usr/bin/env bash
# README command one: ipamd on the embedded simulated cloud, serving real pods in real
# network namespaces. Options are passed through: --pods N, --instance-type T, --daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
unset NODE_EXTRA_CA_CERTS
exec node dist/demo/main.js "$@"
